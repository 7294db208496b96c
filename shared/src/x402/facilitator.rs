//! The facilitator: /verify before the work, /settle after the store committed.
//!
//! `Local` is for development and tests: the local checks are its verification, and settlement
//! moves no money: it returns a transaction id starting `local-settlement:`, which cannot be
//! mistaken for a chain hash, and the ledger records it. `Remote` calls an x402 facilitator over
//! HTTPS with the HTTP/TLS stack the AWS SDK already brings.

use super::types::{PaymentPayload, PaymentRequirements, SettlementResponse, X402_VERSION};
use leasekit_json_http::JsonHttp;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

/// The prefix of the local facilitator's transaction ids.
pub const LOCAL_TRANSACTION_PREFIX: &str = "local-settlement:";

#[derive(Clone)]
pub enum Facilitator {
    Local,
    /// Boxed: the HTTPS client is large and built once per process.
    Remote(Box<Remote>),
}

#[derive(Clone)]
pub struct Remote {
    base: String,
    authorization: Option<String>,
    http: JsonHttp,
}

/// The facilitator did not answer usably (network, timeout, status, body).
#[derive(Debug, thiserror::Error)]
#[error("facilitator: {0}")]
pub struct Unreachable(pub String);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct VerifyResponse {
    is_valid: bool,
    #[serde(default)]
    invalid_reason: Option<String>,
}

impl Remote {
    /// `base` is the facilitator's URL (its /verify and /settle are below it); `authorization` is
    /// sent as the Authorization header when given.
    pub fn new(
        base: &str,
        timeout: Duration,
        authorization: Option<String>,
    ) -> Result<Self, Unreachable> {
        let http = JsonHttp::new(timeout).map_err(|e| Unreachable(e.0))?;
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            authorization,
            http,
        })
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, Unreachable> {
        let headers: Vec<(&str, &str)> = self
            .authorization
            .iter()
            .map(|a| ("authorization", a.as_str()))
            .collect();
        let answer = self
            .http
            .post(&format!("{}{path}", self.base), &headers, body)
            .await
            .map_err(|e| Unreachable(format!("{path}: {e}")))?;
        if !(200..300).contains(&answer.status) {
            return Err(Unreachable(format!("{path} answered {}", answer.status)));
        }
        Ok(answer.body)
    }
}

fn request_body(payload: &PaymentPayload, requirements: &PaymentRequirements) -> Value {
    json!({"x402Version": X402_VERSION, "paymentPayload": payload, "paymentRequirements": requirements})
}

impl Facilitator {
    /// `Ok(Ok(()))` valid; `Ok(Err(reason))` the facilitator says it is not.
    pub async fn verify(
        &self,
        payload: &PaymentPayload,
        requirements: &PaymentRequirements,
    ) -> Result<Result<(), String>, Unreachable> {
        match self {
            Facilitator::Local => Ok(Ok(())),
            Facilitator::Remote(remote) => {
                let answer = remote
                    .post("/verify", &request_body(payload, requirements))
                    .await?;
                let answer: VerifyResponse = serde_json::from_value(answer)
                    .map_err(|e| Unreachable(format!("/verify: {e}")))?;
                Ok(if answer.is_valid {
                    Ok(())
                } else {
                    Err(answer.invalid_reason.unwrap_or_else(|| "invalid".into()))
                })
            }
        }
    }

    /// Settle. `Ok` is the facilitator's answer, successful or not (a refusal is final);
    /// `Err` means no usable answer came (network, timeout, status, body): the settlement may be
    /// tried again while the authorization is valid.
    pub async fn settle(
        &self,
        payload: &PaymentPayload,
        requirements: &PaymentRequirements,
    ) -> Result<SettlementResponse, Unreachable> {
        match self {
            Facilitator::Local => {
                let mut id = [0u8; 16];
                getrandom::fill(&mut id)
                    .map_err(|_| Unreachable("no randomness for a local transaction id".into()))?;
                Ok(SettlementResponse {
                    success: true,
                    error_reason: None,
                    payer: Some(payload.payload.authorization.from.to_lowercase()),
                    transaction: format!("{LOCAL_TRANSACTION_PREFIX}{}", hex::encode(id)),
                    network: requirements.network.clone(),
                    amount: Some(requirements.amount.clone()),
                })
            }
            Facilitator::Remote(remote) => {
                let answer = remote
                    .post("/settle", &request_body(payload, requirements))
                    .await?;
                serde_json::from_value(answer)
                    .map_err(|e| Unreachable(format!("/settle answered: {e}")))
            }
        }
    }
}
