//! Sending one request: a requestId for a mutation, the caller's key or payment, and the
//! retries (no answer, 502-504, a 429 that asks little) that never apply a call twice.

use super::{Auth, CALL_TIMEOUT, Client, Error, READ_OPS, refused, request_id, retry};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::time::Instant;

impl Client {
    /// Send one lease request (`op`, `resource`, ...) and get the whole answer, `data` and
    /// `_provenance`. A mutation without a requestId gets one, kept across this call's retries,
    /// so a retry is answered, never re-applied.
    pub async fn send(&self, body: Value) -> Result<Value, Error> {
        self.send_by(body, None).await
    }

    /// [`Client::send`], giving up at `by`: each attempt waits only for the time left, and a retry
    /// is made only while time is left.
    pub(crate) async fn send_by(
        &self,
        mut body: Value,
        by: Option<Instant>,
    ) -> Result<Value, Error> {
        let read = READ_OPS.iter().any(|op| body["op"] == *op);
        if !read && body.get("requestId").is_none() {
            body["requestId"] = json!(request_id()?);
        }
        let mut headers: Vec<(&str, String)> = Vec::new();
        if let Auth::ApiKey { key, tenant } = &self.auth {
            body["tenantId"] = json!(tenant);
            headers.push(("x-api-key", key.clone()));
        }
        let late = |last: &str| {
            Error::Unavailable(format!("no answer before the deadline (last: {last})"))
        };
        let mut last = String::from("none yet");
        // What the last 429 asked to wait, instead of the doubling pause.
        let mut asked: Option<Duration> = None;
        for attempt in 0..retry::ATTEMPTS {
            if attempt > 0 {
                let backoff = retry::pause(attempt, asked.take());
                if by.is_some_and(|by| Instant::now() + backoff >= by) {
                    return Err(late(&last));
                }
                tokio::time::sleep(backoff).await;
            }
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            // A call that waits on the server is given its wait on top of the usual timeout.
            let http = match body["waitSeconds"].as_u64() {
                Some(wait) if wait > 0 => self
                    .http
                    .with_timeout(CALL_TIMEOUT + Duration::from_secs(wait)),
                _ => self.http.clone(),
            };
            let post = http.post(&self.url, &pairs, &body);
            let answer = match by {
                None => post.await,
                Some(by) => match tokio::time::timeout_at(by, post).await {
                    Ok(answer) => answer,
                    Err(_) => return Err(late("the attempt in flight")),
                },
            };
            let answer = match answer {
                Ok(answer) => answer,
                Err(e) => {
                    last = e.0;
                    continue;
                }
            };
            match answer.status {
                200 => return Ok(answer.body),
                402 => match &self.auth {
                    Auth::Pay(pay) if !headers.iter().any(|(k, _)| *k == "payment-signature") => {
                        headers.push((
                            "payment-signature",
                            pay(&answer.body).map_err(Error::Payment)?,
                        ));
                    }
                    // A fresh payment for a retry: the last one was used (or refused).
                    Auth::Pay(pay) => {
                        headers.retain(|(k, _)| *k != "payment-signature");
                        headers.push((
                            "payment-signature",
                            pay(&answer.body).map_err(Error::Payment)?,
                        ));
                        last = answer.body["error"]
                            .as_str()
                            .unwrap_or("payment refused")
                            .to_owned();
                    }
                    Auth::ApiKey { .. } => return Err(refused(answer.status, &answer.body)),
                },
                // Over a bound of the caller's own (a waiting call over its account's share of
                // the server's waits): again after what Retry-After asks, if it asks little.
                429 => match retry::retry_after(
                    answer.headers.get("retry-after").map(|v| v.as_bytes()),
                ) {
                    Some(wait) if wait <= retry::MAX_RETRY_AFTER => {
                        asked = Some(wait);
                        last = format!("429: {}", answer.body["error"].as_str().unwrap_or(""));
                    }
                    _ => return Err(refused(answer.status, &answer.body)),
                },
                502..=504 => {
                    last = format!(
                        "{}: {}",
                        answer.status,
                        answer.body["error"].as_str().unwrap_or("")
                    )
                }
                status => return Err(refused(status, &answer.body)),
            }
        }
        Err(Error::Unavailable(last))
    }
}
