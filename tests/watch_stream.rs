//! A watch as a stream of server-sent events from `leasekit serve`: `Accept: text/event-stream`
//! on a watch's POST, one `change` event per change (id: the state's tag), refused with 406 for
//! other ops and for callers without a key; a stream that is hung up on gives back its wait.

mod support;

use serde_json::{Value, json};
use std::time::Duration;
use support::*;
use tempfile::TempDir;

const TENANT: &str = "streams";

/// An open stream, read event by event.
struct Stream {
    response: reqwest::Response,
    buffer: String,
}

/// One event: its name, id and data.
#[derive(Debug)]
struct Event {
    name: String,
    id: Option<String>,
    data: Value,
}

/// `body` POSTed with acme's key, accepting `accept`.
async fn post_accepting(server: &Server, body: &Value, accept: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/api/v1/lease", server.url))
        .header("x-api-key", ACME_KEY)
        .header("accept", accept)
        .json(body)
        .send()
        .await
        .unwrap()
}

impl Stream {
    async fn open(server: &Server, body: Value) -> reqwest::Response {
        post_accepting(server, &body, "text/event-stream").await
    }

    async fn watch(server: &Server, resource: &str, tag: Option<&str>) -> Self {
        let mut body = json!({"op": "watch", "tenantId": TENANT, "resource": resource});
        if let Some(tag) = tag {
            body["stateTag"] = json!(tag);
        }
        let response = Self::open(server, body).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event (comments skipped), within `bound`.
    async fn next(&mut self, bound: Duration) -> Event {
        tokio::time::timeout(bound, async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let block: String = self.buffer.drain(..end + 2).collect();
                    let (mut name, mut id, mut data) = (String::new(), None, String::new());
                    for line in block.lines() {
                        if let Some(v) = line.strip_prefix("event: ") {
                            name = v.to_owned();
                        } else if let Some(v) = line.strip_prefix("id: ") {
                            id = Some(v.to_owned());
                        } else if let Some(v) = line.strip_prefix("data: ") {
                            data.push_str(v);
                        }
                    }
                    if name.is_empty() && data.is_empty() {
                        continue; // a keep-alive comment
                    }
                    return Event {
                        name,
                        id,
                        data: serde_json::from_str(&data).unwrap(),
                    };
                }
                let chunk = self
                    .response
                    .chunk()
                    .await
                    .unwrap()
                    .expect("the stream ended");
                self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        })
        .await
        .expect("an event in time")
    }
}

async fn lease(server: &Server, body: Value) -> Value {
    let mut body = body;
    body["tenantId"] = json!(TENANT);
    if body["op"] != "get" {
        body["requestId"] = json!(format!("req-{}", rand_hex()));
    }
    let answer = post(
        &server.url,
        "/api/v1/lease",
        &body,
        &[("x-api-key", ACME_KEY.into())],
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.body["data"].clone()
}

fn rand_hex() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_sends_each_change_with_its_tag_as_id() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let mut stream = Stream::watch(&server, "leader", None).await;
    let first = stream.next(Duration::from_secs(2)).await;
    assert_eq!(
        (first.name.as_str(), &first.data["data"]["holder"]),
        ("change", &Value::Null)
    );
    assert_eq!(first.id.as_deref(), first.data["data"]["stateTag"].as_str());
    assert!(
        first.data["_provenance"].is_object(),
        "signed: {}",
        first.data
    );

    let taken = lease(&server, json!({"op": "acquire", "resource": "leader", "holder": "a", "ttlSeconds": 1, "value": "10.0.0.1"})).await;
    let event = stream.next(Duration::from_millis(500)).await;
    assert_eq!(event.data["data"]["holder"], "a");
    assert_eq!(event.data["data"]["value"], "10.0.0.1");
    assert_eq!(event.id.as_deref(), taken["stateTag"].as_str());
    // A renew that only moves the expiry is no change; one with a value is.
    lease(
        &server,
        json!({"op": "renew", "resource": "leader", "holder": "a", "token": 1, "ttlSeconds": 1}),
    )
    .await;
    lease(&server, json!({"op": "renew", "resource": "leader", "holder": "a", "token": 1, "ttlSeconds": 1, "value": "10.0.0.2"})).await;
    let event = stream.next(Duration::from_millis(500)).await;
    assert_eq!(event.data["data"]["value"], "10.0.0.2");
    // The lapse, a second after the last renew, is sent as it happens.
    let event = stream.next(Duration::from_millis(1_600)).await;
    assert_eq!(event.data["data"]["holder"], Value::Null);

    // Reconnecting with the last id misses nothing: a change made meanwhile comes at once.
    let last = event.id.unwrap();
    drop(stream);
    lease(
        &server,
        json!({"op": "acquire", "resource": "leader", "holder": "b", "ttlSeconds": 30}),
    )
    .await;
    let mut again = Stream::watch(&server, "leader", Some(&last)).await;
    let event = again.next(Duration::from_millis(500)).await;
    assert_eq!(event.data["data"]["holder"], "b");
    assert_eq!(event.data["data"]["fencingToken"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_keyed_watch_streams() {
    let dir = TempDir::new().unwrap();
    let server = Server::start(dir.path());
    let get = json!({"op": "get", "tenantId": TENANT, "resource": "r"});
    let refused = Stream::open(&server, get).await;
    assert_eq!(refused.status(), 406);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("only a watch"),
        "{body}"
    );

    let anonymous = reqwest::Client::new()
        .post(format!("{}/api/v1/lease", server.url))
        .header("accept", "text/event-stream")
        .json(&json!({"op": "watch", "resource": "r"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 406);
    let body: Value = anonymous.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("API key"),
        "{body}"
    );

    // A caller that takes JSON too (an MCP client sends both types on every request) gets the
    // one JSON answer, for a watch and for any other op (an acquire was refused with 406).
    for body in [
        json!({"op": "watch", "tenantId": TENANT, "resource": "r", "waitSeconds": 0}),
        json!({"op": "acquire", "tenantId": TENANT, "resource": "r", "holder": "h", "requestId": "both-types-1"}),
    ] {
        let both = post_accepting(&server, &body, "application/json, text/event-stream").await;
        assert_eq!(both.status(), 200);
        let answer: Value = both.json().await.unwrap();
        assert_eq!(answer["data"]["op"], body["op"], "{answer}");
    }

    // Bad input is a 400 naming the field, before any stream starts.
    let bad = Stream::open(
        &server,
        json!({"op": "watch", "tenantId": TENANT, "resource": "r", "stateTag": 7}),
    )
    .await;
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.unwrap();
    assert!(body.to_string().contains("stateTag"), "{body}");
}

/// Each stream holds one of its account's waits while it waits; hung up on, it gives it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_hung_up_on_gives_its_wait_back() {
    let dir = TempDir::new().unwrap();
    let server = Server::start_with(dir.path(), &["--max-waits-per-account", "2"]);
    for round in 0..3 {
        let mut streams = Vec::new();
        for n in 0..2 {
            let mut stream = Stream::watch(&server, &format!("r{n}"), None).await;
            stream.next(Duration::from_secs(2)).await;
            streams.push(stream);
        }
        // Both waits are taken: a third stream is told so, and ends.
        let mut third = Stream::watch(&server, "r9", None).await;
        let first = third.next(Duration::from_secs(2)).await;
        assert_eq!(first.name, "change", "round {round}");
        let over = third.next(Duration::from_secs(2)).await;
        assert_eq!(over.name, "error", "round {round}: {over:?}");
        assert_eq!(
            (&over.data["code"], &over.data["status"]),
            (&json!("RATE_LIMITED"), &json!(429)),
            "{over:?}"
        );
        // The two that hold the waits still hear their changes.
        for (n, stream) in streams.iter_mut().enumerate() {
            let holder = format!("h{round}");
            lease(&server, json!({"op": "acquire", "resource": format!("r{n}"), "holder": holder, "ttlSeconds": 1})).await;
            let event = stream.next(Duration::from_millis(500)).await;
            assert_eq!(
                (event.name.as_str(), event.data["data"]["holder"].as_str()),
                ("change", Some(holder.as_str()))
            );
        }
        drop(streams);
        // Given back: the next round's streams wait as these did (a leak would refuse them).
        tokio::time::sleep(Duration::from_millis(1_300)).await;
    }
}
