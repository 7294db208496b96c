//! A stand-in x402 facilitator on loopback: /verify and /settle answer as its mode says, and every
//! request it gets is kept for the test to inspect.

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Copy)]
pub enum Mode {
    Accepts,
    RefusesVerify,
    FailsSettle,
    /// /settle answers successfully, after this long (a slow chain, a slow facilitator).
    SlowSettle(Duration),
}

/// One request the facilitator got: path, JSON body, Authorization header.
pub type Call = (String, Value, Option<String>);

#[derive(Clone)]
pub struct Seen(pub Arc<Mutex<Vec<Call>>>);

impl Seen {
    /// The authorization nonces /settle was called for, in order (repeats included).
    pub fn settled_nonces(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(path, _, _)| path == "/settle")
            .map(|(_, body, _)| {
                body["paymentPayload"]["payload"]["authorization"]["nonce"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }
}

pub async fn start(mode: Mode) -> (String, Seen) {
    let seen = Seen(Arc::default());
    let record = |path: &'static str| {
        move |State((mode, seen)): State<(Mode, Seen)>,
              headers: axum::http::HeaderMap,
              Json(body): Json<Value>| async move {
            let auth = headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_owned());
            seen.0
                .lock()
                .unwrap()
                .push((path.to_owned(), body.clone(), auth));
            let payer = body["paymentPayload"]["payload"]["authorization"]["from"].clone();
            match (path, mode) {
                ("/verify", Mode::RefusesVerify) => Json(
                    json!({"isValid": false, "invalidReason": "insufficient_funds", "payer": payer}),
                ),
                ("/verify", _) => Json(json!({"isValid": true, "payer": payer})),
                ("/settle", Mode::FailsSettle) => Json(
                    json!({"success": false, "errorReason": "transaction_reverted", "transaction": "", "network": "eip155:84532", "payer": payer}),
                ),
                (_, mode) => {
                    if let ("/settle", Mode::SlowSettle(delay)) = (path, mode) {
                        tokio::time::sleep(delay).await;
                    }
                    Json(
                        json!({"success": true, "transaction": format!("0x{}", "ab".repeat(32)), "network": "eip155:84532", "payer": payer}),
                    )
                }
            }
        }
    };
    let app = axum::Router::new()
        .route("/verify", post(record("/verify")))
        .route("/settle", post(record("/settle")))
        .with_state((mode, seen.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}
