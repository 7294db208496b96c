//! API Gateway REST (payload v1) events, recorded as JSON under `tests/fixtures/`, through the
//! Lambda service and the authorizer exactly as deployed: stage prefix included.

mod common;

use common::test_store;
use leasekit_core::auth::authorizer::{AuthorizerError, AuthorizerRequest, authorize};
use leasekit_core::config::PublicUrl;
use leasekit_core::http::{AppState, Routes, Settings, lambda};
use leasekit_core::keys::{ApiKey, KeyRecord};
use leasekit_core::provenance::Issuer;
use leasekit_core::store::KeyStore;
use serde_json::{Value, json};
use tower::ServiceExt;

fn fixture(name: &str) -> String {
    let path = format!("{}/../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

async fn call(event: &str) -> (u16, Value) {
    call_with(event, None).await
}

/// Send `event` through the Lambda service, with `account`'s fixture key registered if given.
async fn call_with(event: &str, account: Option<&str>) -> (u16, Value) {
    let store = test_store().await;
    if let Some(account) = account {
        let keys = KeyStore::new(store.client.clone(), &store.tables.keys);
        assert!(
            keys.insert(&KeyRecord::new(&fixture_key(), account, 1))
                .await
                .unwrap()
        );
    }
    let request = lambda_http::request::from_str(event).expect("a REST API event");
    assert!(
        request.uri().path().starts_with("/prod/"),
        "lambda_http keeps the stage: {}",
        request.uri()
    );
    let state = AppState::new(Settings {
        dynamodb: store.client,
        tables: store.tables,
        issuer: Some(Issuer::from_seed(&[9; 32])),
        payments: None,
        free_claims_per_hour: 60,
        public: PublicUrl::default(),
        on_lambda: true,
        key_changes: None,
        waits_per_payer: None,
    });
    let response = lambda::service(state, Routes::All)
        .oneshot(request)
        .await
        .expect("infallible");
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn account_from_the_authorizer_context_is_the_tenant() {
    let (status, body) = call(&fixture("apigw-rest-lease-account.json")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["granted"], true);
    assert_eq!(body["data"]["fencingToken"], 1);
    assert_eq!(body["data"]["holder"], "worker-7");
    assert_eq!(
        body["_provenance"]["credential"]["proof"]["cryptosuite"],
        "eddsa-jcs-2022"
    );
}

/// The authorizer's context says whether the key has the admin role (`admin: "true"`, with
/// `keyId`): a revoke from a context without it is a 403, with it the revoke is audited under
/// the key's id. (`trust_gateway` is on: the function takes the context as API Gateway made it.)
#[tokio::test]
async fn the_admin_role_comes_from_the_authorizer_context() {
    let event: Value = serde_json::from_str(&fixture("apigw-rest-lease-account.json")).unwrap();
    let with = |context: Value, body: Value| {
        let mut e = event.clone();
        for (k, v) in context.as_object().unwrap() {
            e["requestContext"]["authorizer"][k] = v.clone();
        }
        e["body"] = Value::String(body.to_string());
        e.to_string()
    };
    let revoke = json!({"op": "revoke", "resource": "deploy:prod", "reason": "wedged", "tenantId": "team-a"});
    for context in [
        json!({}),
        json!({"keyId": "0123456789abcdef", "admin": "false"}),
    ] {
        let (status, body) = call(&with(context.clone(), revoke.clone())).await;
        assert_eq!(
            (status, body["code"].clone()),
            (403, json!("FORBIDDEN")),
            "{context}"
        );
    }
    let admin = json!({"keyId": "0123456789abcdef", "admin": "true"});
    let (status, body) = call(&with(admin, json!({"op": "audit", "tenantId": "team-a"}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["entries"], json!([]));
}

#[tokio::test]
async fn authorizer_passes_the_key_id_and_its_role() {
    let (keys, request) = authorizer_with_key(Some(
        KeyRecord::new(&fixture_key(), "acme", 1).with_admin(true),
    ))
    .await;
    let answer = authorize(&keys, &request).await.unwrap();
    assert_eq!(answer.context["admin"], "true");
    assert_eq!(answer.context["keyId"], fixture_key().id().as_str());
    let (keys, request) =
        authorizer_with_key(Some(KeyRecord::new(&fixture_key(), "acme", 1))).await;
    assert_eq!(
        authorize(&keys, &request).await.unwrap().context["admin"],
        "false"
    );
}

#[tokio::test]
async fn without_an_authorizer_the_function_checks_the_key_itself() {
    // Mixed routes (key or x402) have no API Gateway authorizer: the key is checked in-process.
    let event = fixture("apigw-rest-lease-anonymous.json");
    let (status, body) = call_with(&event, Some("acme")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["granted"], true);
    let (status, body) = call(&event).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("UNAUTHORIZED")),
        "an unknown key"
    );
    let mut keyless: Value = serde_json::from_str(&event).unwrap();
    for headers in ["headers", "multiValueHeaders"] {
        keyless[headers]
            .as_object_mut()
            .unwrap()
            .remove("X-API-KEY");
    }
    let keyless = keyless.to_string();
    assert!(!keyless.contains("X-API-KEY"));
    let (status, body) = call(&keyless).await;
    assert_eq!(status, 401, "no key and no payments configured: {body}");
    assert_eq!(body["error"], "an API key (X-API-KEY) is required");
}

#[tokio::test]
async fn unknown_routes_behind_the_stage_are_404() {
    let event =
        fixture("apigw-rest-lease-account.json").replace("\"/api/v1/lease\"", "\"/api/v1/leasex\"");
    let (status, body) = call(&event).await;
    assert_eq!(status, 404, "{body}");
}

async fn authorizer_with_key(record: Option<KeyRecord>) -> (KeyStore, AuthorizerRequest) {
    let store = test_store().await;
    let keys = KeyStore::new(store.client, &store.tables.keys);
    if let Some(record) = record {
        assert!(keys.insert(&record).await.unwrap());
    }
    let request = serde_json::from_str(&fixture("apigw-authorizer-request.json"))
        .expect("an authorizer event");
    (keys, request)
}

fn fixture_key() -> ApiKey {
    ApiKey::parse("fixture-key-0123456789").unwrap()
}

#[tokio::test]
async fn authorizer_passes_the_account_for_a_valid_key() {
    let (keys, request) =
        authorizer_with_key(Some(KeyRecord::new(&fixture_key(), "acme", 1))).await;
    let answer = authorize(&keys, &request).await.unwrap();
    assert_eq!(answer.principal_id, "acme");
    assert_eq!(answer.context["account"], "acme");
    let answer = serde_json::to_value(&answer).unwrap();
    assert_eq!(answer["policyDocument"]["Statement"][0]["Effect"], "Allow");
    assert_eq!(
        answer["policyDocument"]["Statement"][0]["Resource"],
        "arn:aws:execute-api:eu-west-1:123456789012:abc123/prod/*/*"
    );
}

#[tokio::test]
async fn authorizer_refuses_unknown_revoked_and_malformed_keys() {
    let (keys, request) = authorizer_with_key(None).await;
    let err = authorize(&keys, &request).await.unwrap_err();
    assert!(matches!(err, AuthorizerError::Unauthorized));
    assert_eq!(
        err.to_string(),
        "Unauthorized",
        "API Gateway needs exactly this message for a 401"
    );

    let mut revoked = KeyRecord::new(&fixture_key(), "acme", 1);
    revoked.revoked_at = Some(2);
    let (keys, request) = authorizer_with_key(Some(revoked)).await;
    assert!(matches!(
        authorize(&keys, &request).await,
        Err(AuthorizerError::Unauthorized)
    ));

    let (keys, mut request) =
        authorizer_with_key(Some(KeyRecord::new(&fixture_key(), "acme", 1))).await;
    request.headers = Some([("x-api-key".to_owned(), "short".to_owned())].into());
    assert!(matches!(
        authorize(&keys, &request).await,
        Err(AuthorizerError::Unauthorized)
    ));
}

#[tokio::test]
async fn authorizer_lets_keyless_requests_through_without_an_account() {
    let (keys, mut request) = authorizer_with_key(None).await;
    request.headers = Some([("Content-Type".to_owned(), "application/json".to_owned())].into());
    let answer = authorize(&keys, &request).await.unwrap();
    assert!(answer.context.get("account").is_none());
}

#[tokio::test]
async fn revoking_a_key_takes_effect() {
    let store = test_store().await;
    let keys = KeyStore::new(store.client, &store.tables.keys);
    let key = ApiKey::generate().unwrap();
    assert!(keys.insert(&KeyRecord::new(&key, "acme", 1)).await.unwrap());
    assert!(
        !keys
            .insert(&KeyRecord::new(&key, "globex", 1))
            .await
            .unwrap(),
        "ids are unique"
    );
    assert_eq!(
        leasekit_core::auth::authenticate(&keys, key.expose())
            .await
            .unwrap()
            .map(|h| h.account)
            .as_deref(),
        Some("acme")
    );
    assert!(keys.revoke(&key.id(), 5).await.unwrap());
    assert_eq!(
        leasekit_core::auth::authenticate(&keys, key.expose())
            .await
            .unwrap(),
        None
    );
    let unknown = ApiKey::generate().unwrap();
    assert!(!keys.revoke(&unknown.id(), 5).await.unwrap());
}

#[tokio::test]
async fn the_lambda_key_cache_holds_an_account_for_a_while_and_no_cache_does_not() {
    use leasekit_core::auth::{CachedKeys, KeyFreshness};
    use std::time::Duration;
    let store = test_store().await;
    let keys = KeyStore::new(store.client, &store.tables.keys);
    let key = ApiKey::generate().unwrap();
    keys.insert(&KeyRecord::new(&key, "acme", 1)).await.unwrap();
    let cached = CachedKeys::new(keys.clone(), KeyFreshness::For(Duration::from_secs(60)));
    let uncached = CachedKeys::new(keys.clone(), KeyFreshness::Never);
    assert_eq!(
        cached
            .resolve(key.expose())
            .await
            .unwrap()
            .map(|h| h.account)
            .as_deref(),
        Some("acme")
    );
    assert_eq!(
        uncached
            .resolve(key.expose())
            .await
            .unwrap()
            .map(|h| h.account)
            .as_deref(),
        Some("acme")
    );
    keys.revoke(&key.id(), 2).await.unwrap();
    assert_eq!(
        cached
            .resolve(key.expose())
            .await
            .unwrap()
            .map(|h| h.account)
            .as_deref(),
        Some("acme"),
        "within the cache time"
    );
    assert_eq!(
        uncached.resolve(key.expose()).await.unwrap(),
        None,
        "at once without a cache"
    );
    // Unknown keys are never cached.
    let unknown = ApiKey::generate().unwrap();
    assert_eq!(cached.resolve(unknown.expose()).await.unwrap(), None);
    keys.insert(&KeyRecord::new(&unknown, "globex", 3))
        .await
        .unwrap();
    assert_eq!(
        cached
            .resolve(unknown.expose())
            .await
            .unwrap()
            .map(|h| h.account)
            .as_deref(),
        Some("globex")
    );
}

/// The local server's cache: a key is remembered until the generation changes, and a change
/// made after the generation was read is never hidden by a lookup that began before it.
#[tokio::test]
async fn the_local_key_cache_holds_an_account_until_the_keys_change() {
    use leasekit_core::auth::{CachedKeys, KeyChanges, KeyFreshness};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    /// A generation the test moves by hand; `u64::MAX` stands for "cannot tell".
    struct Counter(AtomicU64);
    impl KeyChanges for Counter {
        fn generation(&self) -> std::io::Result<u64> {
            match self.0.load(Ordering::SeqCst) {
                u64::MAX => Err(std::io::Error::other("unreadable")),
                n => Ok(n),
            }
        }
    }

    let store = test_store().await;
    let keys = KeyStore::new(store.client, &store.tables.keys);
    let key = ApiKey::generate().unwrap();
    keys.insert(&KeyRecord::new(&key, "acme", 1)).await.unwrap();
    let generation = Arc::new(Counter(AtomicU64::new(7)));
    let cached = CachedKeys::new(
        keys.clone(),
        KeyFreshness::UntilChanged {
            changes: generation.clone(),
            at_most: Duration::from_secs(60),
        },
    );
    assert_eq!(
        cached
            .resolve(key.expose())
            .await
            .unwrap()
            .map(|h| h.account)
            .as_deref(),
        Some("acme")
    );
    // Revoked behind the cache's back, generation unchanged: still remembered (this is what
    // the generation is for, and why `leasekit keys` must move it).
    keys.revoke(&key.id(), 2).await.unwrap();
    assert_eq!(
        cached
            .resolve(key.expose())
            .await
            .unwrap()
            .map(|h| h.account)
            .as_deref(),
        Some("acme")
    );
    // The generation moved: the next check reads the store.
    generation.0.store(8, Ordering::SeqCst);
    assert_eq!(cached.resolve(key.expose()).await.unwrap(), None);
    // The generation read before comes back (a file restored, removed and recreated): the
    // entry it stamped is gone, not revived.
    generation.0.store(7, Ordering::SeqCst);
    assert_eq!(cached.resolve(key.expose()).await.unwrap(), None);

    // A generation that cannot be read bypasses the cache both ways.
    let other = ApiKey::generate().unwrap();
    keys.insert(&KeyRecord::new(&other, "globex", 3))
        .await
        .unwrap();
    assert_eq!(
        cached
            .resolve(other.expose())
            .await
            .unwrap()
            .map(|h| h.account)
            .as_deref(),
        Some("globex")
    );
    generation.0.store(u64::MAX, Ordering::SeqCst);
    keys.revoke(&other.id(), 4).await.unwrap();
    assert_eq!(cached.resolve(other.expose()).await.unwrap(), None);
}

/// Should a change of the keys fail to be recorded, the local cache still forgets a key after
/// `at_most`.
#[tokio::test]
async fn the_local_key_cache_forgets_a_key_after_at_most() {
    use leasekit_core::auth::{CachedKeys, KeyChanges, KeyFreshness};
    use std::sync::Arc;
    use std::time::Duration;

    struct Never;
    impl KeyChanges for Never {
        fn generation(&self) -> std::io::Result<u64> {
            Ok(1)
        }
    }
    let store = test_store().await;
    let keys = KeyStore::new(store.client, &store.tables.keys);
    let key = ApiKey::generate().unwrap();
    keys.insert(&KeyRecord::new(&key, "acme", 1)).await.unwrap();
    let cached = CachedKeys::new(
        keys.clone(),
        KeyFreshness::UntilChanged {
            changes: Arc::new(Never),
            at_most: Duration::from_millis(300),
        },
    );
    assert!(cached.resolve(key.expose()).await.unwrap().is_some());
    keys.revoke(&key.id(), 2).await.unwrap();
    assert!(cached.resolve(key.expose()).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(cached.resolve(key.expose()).await.unwrap(), None);
}

/// A tool call that fails on the store answers a tool error (HTTP 200 on the JSON-RPC level)
/// with a generic body; its cause rides on the response for the request's one log line, as a
/// route's 502 does, and never in the body.
#[tokio::test]
async fn an_mcp_tool_failure_carries_its_cause_to_the_request_line() {
    let mut event: Value = serde_json::from_str(&fixture("apigw-rest-lease-account.json")).unwrap();
    event["resource"] = "/mcp".into();
    event["path"] = "/mcp".into();
    event["requestContext"]["path"] = "/prod/mcp".into();
    for (name, value) in [
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-06-18"),
    ] {
        event["headers"][name] = value.into();
        event["multiValueHeaders"][name] = serde_json::json!([value]);
    }
    event["body"] =
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "lease",
            "arguments": {"op": "acquire", "resource": "r", "holder": "w", "tenantId": "team-a"},
        }})
        .to_string()
        .into();
    let request = lambda_http::request::from_str(&event.to_string()).expect("a REST API event");
    // The account comes from the authorizer: no key lookup. The store is unreachable.
    let state = AppState::new(Settings {
        dynamodb: leasekit_core::store::local_client("http://127.0.0.1:9"),
        tables: leasekit_core::store::Tables::with_prefix("none-"),
        issuer: Some(Issuer::from_seed(&[9; 32])),
        payments: None,
        free_claims_per_hour: 60,
        public: PublicUrl::parse("https://abc123.execute-api.eu-west-1.amazonaws.com/prod")
            .unwrap(),
        on_lambda: true,
        key_changes: None,
        waits_per_payer: None,
    });
    let response = lambda::service(state, Routes::Mcp)
        .oneshot(request)
        .await
        .expect("infallible");
    let failure = response
        .extensions()
        .get::<leasekit_core::http::error::Failure>()
        .cloned()
        .expect("the cause is on the response");
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = String::from_utf8(bytes.to_vec()).unwrap();
    assert!(body.contains("STORE_UNAVAILABLE"), "{body}");
    assert!(failure.0.contains("DynamoDB request failed"), "{failure:?}");
    assert!(!body.contains("DynamoDB request failed"), "{body}");
}
