//! Every URL the service advertises (docs links, OpenAPI servers, the catalog, x402
//! `resource.url`) starts with the configured public URL: a caller's `Host` or
//! `X-Forwarded-Proto` (`https-evil`, `javascript:`) never shows up in an answer.

mod support;

use serde_json::{Value, json};
use support::*;
use tempfile::TempDir;

/// GET `path` with forged `Host` and `X-Forwarded-Proto`; the body as text.
async fn forged_get(server: &Server, path: &str, proto: &str) -> String {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", server.url))
        .header("host", "evil.example")
        .header("x-forwarded-proto", proto)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.unwrap()
}

#[tokio::test]
async fn advertised_urls_ignore_the_callers_host_and_forwarded_proto() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    for proto in ["https-evil", "javascript:", "https"] {
        for path in [
            "/docs/lease.json",
            "/docs/lease/",
            "/openapi.json",
            "/api/v1/catalog",
        ] {
            let text = forged_get(&server, path, proto).await;
            assert!(!text.contains("evil"), "{path} with {proto}: {text}");
            assert!(!text.contains("javascript:"), "{path} with {proto}");
            assert!(!text.contains("https-evil"), "{path} with {proto}");
        }
        let page: Value =
            serde_json::from_str(&forged_get(&server, "/docs/lease.json", proto).await).unwrap();
        assert_eq!(page["links"]["docs"], format!("{}/docs/lease/", server.url));
        let openapi: Value =
            serde_json::from_str(&forged_get(&server, "/openapi.json", proto).await).unwrap();
        assert_eq!(openapi["servers"][0]["url"], server.url.as_str());
    }
    // The x402 offer names the configured URL too.
    let headers = [
        ("host", "evil.example".to_owned()),
        ("x-forwarded-proto", "javascript:".to_owned()),
    ];
    let a = post(
        &server.url,
        "/api/v1/lease",
        &json!({"op": "get", "resource": "r"}),
        &headers,
    )
    .await;
    assert_eq!(a.status, 402, "{}", a.body);
    assert_eq!(
        a.required.unwrap().resource.url,
        format!("{}/api/v1/lease", server.url)
    );
}

#[tokio::test]
async fn public_url_sets_every_advertised_url_and_must_be_http_or_https() {
    let dir = TempDir::new().unwrap();
    let server = Server::start_with(
        dir.path(),
        &["--public-url", "https://Lease.Example.com/prod/"],
    );
    let page: Value = reqwest::get(format!("{}/docs/lease.json", server.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        page["links"]["docs"],
        "https://lease.example.com/prod/docs/lease/"
    );
    server.stop();
    for bad in [
        "javascript:alert(1)",
        "ftp://example.com",
        "https://example.com/?q",
        "https://u@example.com",
    ] {
        let out = leasekit()
            .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args(["--public-url", bad])
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad} was accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--public-url"),
            "{bad}"
        );
    }
}
