//! `leasekit local-aws`: the DynamoDB and Secrets Manager calls of the Lambda functions, served
//! on loopback from a data dir, for `sam local`. And `--dynamodb-endpoint` never asks the
//! instance metadata service for a region.

mod support;

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::{leasekit, local_aws};
use tempfile::TempDir;

/// A stand-in for 169.254.169.254 that counts who connects to it.
fn metadata_service() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (url, hits)
}

#[test]
fn keys_created_against_an_endpoint_never_ask_the_metadata_service() {
    let dir = TempDir::new().unwrap();
    let aws = local_aws(dir.path());
    let home = TempDir::new().unwrap();
    let (metadata, hits) = metadata_service();
    let out = leasekit()
        .args([
            "keys",
            "create",
            "--account",
            "acme",
            "--dynamodb-endpoint",
            &aws.url,
        ])
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .env_remove("AWS_PROFILE")
        .env("HOME", home.path())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &metadata)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = String::from_utf8(out.stdout).unwrap();
    assert!(key.trim().len() > 20, "a key on stdout: {key:?}");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the metadata service was asked"
    );
}

#[tokio::test]
async fn the_signing_key_secret_is_the_data_dirs_key() {
    let dir = TempDir::new().unwrap();
    let aws = local_aws(dir.path());
    let answer: serde_json::Value = reqwest::Client::new()
        .post(&aws.url)
        .header("x-amz-target", "secretsmanager.GetSecretValue")
        .header("content-type", "application/x-amz-json-1.1")
        .body(r#"{"SecretId":"leasekit-signing-key"}"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let seed = std::fs::read_to_string(dir.path().join("signing-key")).unwrap();
    assert_eq!(answer["SecretString"], seed.trim());
    assert_eq!(seed.trim().len(), 64);
    // Anything else that is not DynamoDB is refused, not guessed at.
    let other = reqwest::Client::new()
        .post(&aws.url)
        .header("x-amz-target", "secretsmanager.PutSecretValue")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 400);
}

#[test]
fn it_refuses_to_listen_beyond_loopback() {
    let dir = TempDir::new().unwrap();
    let out = leasekit()
        .args(["local-aws", "--addr", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
}
