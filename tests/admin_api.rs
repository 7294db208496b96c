//! list, revoke and audit over real HTTP against `leasekit serve` (docs/adr/0008): the admin
//! role of API keys (403 FORBIDDEN without it, nothing changed), accounts that never see each
//! other's leases or audit, a paying wallet's revoke in its own tenant, and the bad input of
//! the new fields, each a 400 naming its field.

mod support;

use leasekit_core::x402::client::{header, pay};
use leasekit_core::x402::types::PaymentRequirements;
use serde_json::{Value, json};
use support::*;

fn revoke(resource: &str, reason: &str) -> Value {
    json!({"op": "revoke", "tenantId": "t1", "resource": resource, "reason": reason})
}

#[tokio::test]
async fn only_an_admin_key_revokes_or_reads_the_audit() {
    let (_dir, server) = serve();
    let (plain, admin) = (
        server.client(Some(ACME_KEY)),
        server.client(Some(ACME_ADMIN_KEY)),
    );
    let held = plain.data(acquire("t1", "deploy:prod", "w")).await;
    let token = held["fencingToken"].clone();
    for body in [
        revoke("deploy:prod", "no role"),
        json!({"op": "audit", "tenantId": "t1"}),
    ] {
        let (status, refused) = plain.call(body.clone()).await;
        assert_eq!(
            (status, refused["code"].clone()),
            (403, json!("FORBIDDEN")),
            "{body}"
        );
        assert!(refused["error"].as_str().unwrap().contains("admin"));
    }
    let still = plain.data(get("t1", "deploy:prod")).await;
    assert_eq!(still["holder"], "w", "nothing changed");
    // The admin key of the same account and tenant revokes; the holder learns REVOKED.
    let revoked = admin.data(revoke("deploy:prod", "stuck")).await;
    assert_eq!(revoked["status"], "pass", "{revoked}");
    assert_eq!(revoked["revoked"][0]["holder"], "w");
    let renew = json!({"op": "renew", "tenantId": "t1", "resource": "deploy:prod", "holder": "w", "token": token});
    let renewed = plain.data(renew).await;
    assert_eq!(rule_ids(&renewed), ["REVOKED"]);
    let audit = admin.data(json!({"op": "audit", "tenantId": "t1"})).await;
    let entry = &audit["entries"][0];
    assert_eq!(entry["reason"], "stuck");
    assert!(
        entry["actor"].as_str().unwrap().starts_with("key:"),
        "{entry}"
    );
    assert_eq!(entry["ended"][0]["fencingToken"], token);
    assert_eq!(audit["nextCursor"], Value::Null);
    // Another account's admin sees none of it, whatever tenantId it sends.
    let globex = server.client(Some(GLOBEX_KEY));
    let theirs = globex.data(json!({"op": "list", "tenantId": "t1"})).await;
    assert_eq!(theirs["leases"], json!([]));
}

#[tokio::test]
async fn list_over_http_is_signed_and_pages() {
    let (_dir, server) = serve();
    let c = server.client(Some(ACME_KEY));
    for i in 0..3 {
        c.data(acquire("t1", &format!("job:{i}"), "w")).await;
    }
    let (status, answer) = c
        .call(json!({"op": "list", "tenantId": "t1", "pageSize": 2}))
        .await;
    assert_eq!(status, 200);
    assert!(answer["_provenance"]["credential"]["proof"].is_object());
    let page = &answer["data"];
    assert_eq!(page["op"], "list");
    let names: Vec<&str> = page["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["resource"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["job:0", "job:1"]);
    let cursor = page["nextCursor"].as_str().unwrap().to_owned();
    let next = c
        .data(json!({"op": "list", "tenantId": "t1", "pageSize": 2, "cursor": cursor}))
        .await;
    assert_eq!(next["leases"][0]["resource"], "job:2");
    assert_eq!(next["nextCursor"], Value::Null);
    // The same account's other tenant cannot use the cursor.
    let (status, refused) = c
        .call(json!({"op": "list", "tenantId": "t2", "cursor": cursor}))
        .await;
    assert_eq!(
        (status, refused["witnesses"][0]["path"].clone()),
        (400, json!("/cursor"))
    );
}

#[tokio::test]
async fn the_new_fields_bad_input_is_a_400_naming_the_field() {
    let (_dir, server) = serve();
    let admin = server.client(Some(ACME_ADMIN_KEY));
    admin.data(acquire("t1", "r", "w")).await;
    for (body, path) in [
        (
            json!({"op": "revoke", "tenantId": "t1", "resource": "r"}),
            "/reason",
        ),
        (revoke("r", ""), "/reason"),
        (revoke("r", &"x".repeat(201)), "/reason"),
        (
            json!({"op": "revoke", "tenantId": "t1", "reason": "why"}),
            "/resource",
        ),
        (
            json!({"op": "list", "tenantId": "t1", "pageSize": 0}),
            "/pageSize",
        ),
        (
            json!({"op": "list", "tenantId": "t1", "pageSize": 101}),
            "/pageSize",
        ),
        (
            json!({"op": "list", "tenantId": "t1", "prefix": "a b"}),
            "/prefix",
        ),
        (
            json!({"op": "list", "tenantId": "t1", "cursor": "not a cursor"}),
            "/cursor",
        ),
        (
            json!({"op": "audit", "tenantId": "t1", "cursor": "QUFBQUFBQUFBQUFBQUFBQUFB"}),
            "/cursor",
        ),
        // Fields an op does not take are refused, not ignored (found by the attack of
        // 2026-12-03: a list's resource looked like a filter, a revoke's ttl like a setting).
        (
            json!({"op": "list", "tenantId": "t1", "resource": "r"}),
            "/resource",
        ),
        (
            json!({"op": "list", "tenantId": "t1", "holder": "w"}),
            "/holder",
        ),
        (
            json!({"op": "list", "tenantId": "t1", "requestId": "x"}),
            "/requestId",
        ),
        (
            json!({"op": "audit", "tenantId": "t1", "prefix": "r"}),
            "/prefix",
        ),
        (
            json!({"op": "revoke", "tenantId": "t1", "resource": "r", "reason": "x", "ttlSeconds": 5}),
            "/ttlSeconds",
        ),
        (
            json!({"op": "revoke", "tenantId": "t1", "resource": "r", "reason": "x", "waitSeconds": 1}),
            "/waitSeconds",
        ),
        (
            json!({"op": "get", "tenantId": "t1", "resource": "r", "reason": "x"}),
            "/reason",
        ),
        (
            json!({"op": "acquire", "tenantId": "t1", "resource": "r", "holder": "v", "pageSize": 5}),
            "/pageSize",
        ),
    ] {
        let (status, refused) = admin.call(body.clone()).await;
        assert_eq!(status, 400, "{body}: {refused}");
        let paths: Vec<&str> = refused["witnesses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["path"].as_str().unwrap())
            .collect();
        assert!(paths.contains(&path), "{body}: {refused}");
    }
    let still = admin.data(get("t1", "r")).await;
    assert_eq!(still["holder"], "w", "nothing changed");
    let audit = admin.data(json!({"op": "audit", "tenantId": "t1"})).await;
    assert_eq!(audit["entries"], json!([]));
}

#[tokio::test]
async fn a_paying_wallet_revokes_and_reopens_in_its_own_tenant() {
    let (_dir, server) = serve();
    let pay_post = |body: Value, payment: Option<String>| {
        let url = server.url.clone();
        async move {
            let headers: Vec<(&str, String)> = payment
                .map(|p| ("PAYMENT-SIGNATURE", p))
                .into_iter()
                .collect();
            post(&url, "/api/v1/lease", &body, &headers).await
        }
    };
    let offer: PaymentRequirements = pay_post(json!({"op": "get", "resource": "r"}), None)
        .await
        .required
        .expect("a 402 offer")
        .accepts[0]
        .clone();
    let paid = |nonce: u8| {
        Some(header(
            &pay(&wallet(1), &offer, now_secs(), [nonce; 32]).unwrap(),
        ))
    };
    let held = pay_post(
        json!({"op": "acquire", "resource": "r", "holder": "w"}),
        paid(1),
    )
    .await;
    assert_eq!(held.body["data"]["granted"], true, "{:?}", held.body);
    let revoked = pay_post(
        json!({"op": "revoke", "resource": "r", "reason": "mine"}),
        paid(2),
    )
    .await;
    assert_eq!(revoked.status, 200, "{:?}", revoked.body);
    assert_eq!(revoked.body["data"]["revoked"][0]["holder"], "w");
    let audit = pay_post(json!({"op": "audit"}), paid(3)).await;
    let entry = &audit.body["data"]["entries"][0];
    assert!(
        entry["actor"].as_str().unwrap().starts_with("wallet:0x"),
        "{entry}"
    );
    // Finished work, paid per call (docs/adr/0012): a claim of candidates, a done release, and
    // the wallet's reopen in its own tenant (an admin there: it names no finisher).
    let claimed = pay_post(
        json!({"op": "acquire", "candidates": ["r", "s"], "holder": "w"}),
        paid(4),
    )
    .await;
    assert_eq!(claimed.body["data"]["resource"], "r", "{:?}", claimed.body);
    let token = claimed.body["data"]["fencingToken"].clone();
    // A bad done is refused before the payment is looked at: the same one pays the next call.
    let bad = pay_post(
        json!({"op": "release", "resource": "r", "holder": "w", "token": token, "done": true, "result": "x".repeat(1025)}),
        paid(5),
    )
    .await;
    assert_eq!(bad.status, 400, "{:?}", bad.body);
    let finished = pay_post(
        json!({"op": "release", "resource": "r", "holder": "w", "token": token, "done": true, "result": "paid"}),
        paid(5),
    )
    .await;
    assert_eq!(
        finished.body["data"]["done"]["result"], "paid",
        "{:?}",
        finished.body
    );
    let reopened = pay_post(
        json!({"op": "reopen", "resource": "r", "reason": "again"}),
        paid(6),
    )
    .await;
    assert_eq!(reopened.status, 200, "{:?}", reopened.body);
    assert_eq!(reopened.body["data"]["done"], Value::Null);
}

/// Two API keys in one request are refused (found by the attack of 2026-12-03: the first one
/// was taken, admin or not, where a proxy in front may keep the last).
#[tokio::test]
async fn two_api_keys_are_no_key() {
    let (_dir, server) = serve();
    let body = json!({"op": "audit", "tenantId": "t1"});
    for keys in [[ACME_ADMIN_KEY, ACME_KEY], [ACME_KEY, ACME_ADMIN_KEY]] {
        let response = reqwest::Client::new()
            .post(format!("{}/api/v1/lease", server.url))
            .header("x-api-key", keys[0])
            .header("x-api-key", keys[1])
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 401);
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["code"], "UNAUTHORIZED");
    }
}

/// Finished work over HTTP (docs/adr/0012): a key without the admin role finishes a task and
/// reopens it as its finisher; another holder's reopen with that key is 403 with nothing
/// changed; the admin key reopens whatever mark stands; the audit keeps both.
#[tokio::test]
async fn a_finisher_or_an_admin_reopens_and_no_one_else() {
    let (_dir, server) = serve();
    let (plain, admin) = (
        server.client(Some(ACME_KEY)),
        server.client(Some(ACME_ADMIN_KEY)),
    );
    let held = plain.data(acquire("t1", "task:7", "w1")).await;
    let token = held["fencingToken"].as_u64().unwrap();
    let done = json!({"op": "release", "tenantId": "t1", "resource": "task:7", "holder": "w1", "token": token, "done": true, "result": "sent"});
    let finished = plain.data(done).await;
    assert_eq!(finished["done"]["holder"], "w1", "{finished}");
    assert_eq!(finished["done"]["result"], "sent");
    let again = plain.data(acquire("t1", "task:7", "w2")).await;
    assert_eq!(rule_ids(&again), ["DONE"]);
    assert_eq!(again["witnesses"][0]["actual"]["fencingToken"], token);
    let reopen = |holder: &str, token: u64| json!({"op": "reopen", "tenantId": "t1", "resource": "task:7", "holder": holder, "token": token, "reason": "redo"});
    for body in [
        reopen("w2", token),
        reopen("w1", token + 1),
        json!({"op": "reopen", "tenantId": "t1", "resource": "task:7", "reason": "redo"}),
    ] {
        let (status, refused) = plain.call(body.clone()).await;
        assert_eq!(
            (status, refused["code"].clone()),
            (403, json!("FORBIDDEN")),
            "{body}"
        );
    }
    assert_eq!(
        plain.data(get("t1", "task:7")).await["done"]["holder"],
        "w1"
    );
    let reopened = plain.data(reopen("w1", token)).await;
    assert_eq!(
        (reopened["status"].clone(), reopened["done"].clone()),
        (json!("pass"), Value::Null)
    );
    let taken = plain.data(acquire("t1", "task:7", "w2")).await;
    assert_eq!(taken["fencingToken"], token + 1);
    let done2 = json!({"op": "release", "tenantId": "t1", "resource": "task:7", "holder": "w2", "token": token + 1, "done": true});
    plain.data(done2).await;
    let by_admin = admin
        .data(json!({"op": "reopen", "tenantId": "t1", "resource": "task:7", "reason": "operator"}))
        .await;
    assert_eq!(by_admin["status"], "pass", "{by_admin}");
    let audit = admin
        .data(json!({"op": "audit", "tenantId": "t1", "resource": "task:7"}))
        .await;
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{audit}");
    assert_eq!(entries[0]["reopened"]["holder"], "w2");
    assert_eq!(entries[1]["reopened"]["holder"], "w1");
    assert_eq!(entries[1]["ended"], json!([]));
}
