//! Signed answers over HTTP: every lease answer carries `_provenance`; the verify route accepts
//! an untouched answer and rejects one changed character; the DID document names the signer; the
//! key survives restarts.

mod support;

use serde_json::{Value, json};
use support::*;
use tempfile::TempDir;

async fn verify(server: &Server, document: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/verify-provenance", server.url))
        .json(document)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn did_document(server: &Server) -> Value {
    reqwest::get(format!("{}/.well-known/did.json", server.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn every_answer_is_signed_and_verifies_until_one_character_changes() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let c = server.client(Some(ACME_KEY));
    let did = did_document(&server).await;
    let issuer = did["id"].as_str().unwrap().to_owned();
    assert!(issuer.starts_with("did:key:z6Mk"), "{did}");
    assert_eq!(
        did["assertionMethod"][0],
        did["verificationMethod"][0]["id"]
    );

    for body in [
        acquire("t1", "r", "worker-7"),
        acquire("t1", "r", "worker-8"),
        get("t1", "r"),
        json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "worker-7", "token": 1, "requestId": "rel-1"}),
    ] {
        let (status, answer) = c.call(body.clone()).await;
        assert_eq!(status, 200);
        let credential = &answer["_provenance"]["credential"];
        assert_eq!(credential["issuer"], issuer.as_str());
        assert_eq!(credential["proof"]["cryptosuite"], "eddsa-jcs-2022");
        assert_eq!(
            credential["proof"]["verificationMethod"],
            did["verificationMethod"][0]["id"]
        );
        assert_eq!(credential["credentialSubject"]["op"], body["op"]);
        assert_eq!(
            answer["_provenance"]["manifest"]["assertions"][1]["data"]["actions"][0]["action"],
            "c2pa.created"
        );

        let (status, report) = verify(&server, &answer).await;
        assert_eq!(status, 200);
        assert_eq!(report["verified"], true, "{report}");
        assert_eq!(
            report["checks"],
            json!({"proof": true, "issuer": true, "dataHash": true, "manifest": true})
        );

        // One character of data changed: rejected, and the witness says where.
        let mut tampered = answer.clone();
        let op = answer["data"]["op"].as_str().unwrap();
        tampered["data"]["op"] = json!(format!("{}x", &op[..op.len() - 1]));
        let (status, report) = verify(&server, &tampered).await;
        assert_eq!(status, 200);
        assert_eq!(report["verified"], false);
        assert_eq!(report["checks"]["dataHash"], false);
        assert_eq!(report["witnesses"][0]["ruleId"], "DATA_HASH");
    }

    // A replay carries the original proof, which still verifies.
    let replay = json!({"op": "release", "tenantId": "t1", "resource": "r", "holder": "worker-7", "token": 1, "requestId": "rel-1"});
    let (_, answer) = c.call(replay).await;
    assert_eq!(answer["data"]["replayed"], true);
    assert_eq!(verify(&server, &answer).await.1["verified"], true);
}

#[tokio::test]
async fn the_signing_key_survives_a_restart() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let (_, answer) = server
        .client(Some(ACME_KEY))
        .call(acquire("t1", "r", "w"))
        .await;
    let before = did_document(&server).await;
    server.stop();
    let server = Server::start(dir.path());
    assert_eq!(did_document(&server).await, before);
    assert_eq!(verify(&server, &answer).await.1["verified"], true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("signing-key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o077,
            0,
            "the key file is readable by its owner only"
        );
    }
}

#[tokio::test]
async fn another_servers_answers_are_not_ours() {
    let (a, b) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let server_a = Server::start(a.path());
    let server_b = Server::start(b.path());
    let (_, answer) = server_a
        .client(Some(ACME_KEY))
        .call(acquire("t1", "r", "w"))
        .await;
    let (_, report) = verify(&server_b, &answer).await;
    assert_eq!(report["verified"], false);
    assert_eq!(report["checks"]["proof"], true);
    assert_eq!(report["checks"]["issuer"], false);
}

#[tokio::test]
async fn verify_needs_no_key_but_valid_input() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    for (body, path) in [
        (json!({"data": {}}), "/_provenance"),
        (
            json!({"_provenance": {"manifest": {}, "credential": {}}}),
            "/data",
        ),
        (
            json!({"data": {}, "_provenance": {"manifest": {}}}),
            "/_provenance/credential",
        ),
        (
            json!({"data": [], "_provenance": {"manifest": {}, "credential": {}}}),
            "/data",
        ),
        (
            json!({"data": {}, "_provenance": {"manifest": {}, "credential": {}}, "extra": 1}),
            "/extra",
        ),
    ] {
        let (status, answer) = verify(&server, &body).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(
            answer["witnesses"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["path"] == path),
            "{body}: {answer}"
        );
    }
    // Well-formed but unsigned: a 200 that says what failed.
    let (status, report) = verify(
        &server,
        &json!({"data": {}, "_provenance": {"manifest": {}, "credential": {}}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(report["verified"], false);
    assert_eq!(report["witnesses"][0]["ruleId"], "PROOF");
}
