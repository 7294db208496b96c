//! A small JSON-over-HTTP(S) client on the HTTP/TLS stack the AWS SDK already brings (hyper 1,
//! rustls on aws-lc): the Rust client's transport to the service, and the service's to an x402
//! facilitator. A crate of its own, so that neither depends on the other for it.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::Value;
use std::time::Duration;

#[derive(Clone)]
pub struct JsonHttp {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

/// The request did not produce an answer (connection, TLS, timeout, a body that is not JSON).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpError(pub String);

/// An answer: status, headers, and the body as JSON (`Value::Null` when empty).
#[derive(Debug)]
pub struct JsonAnswer {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Value,
}

impl JsonHttp {
    /// A client whose every request gives up after `timeout`. HTTPS uses the system's roots.
    pub fn new(timeout: Duration) -> Result<Self, HttpError> {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|e| HttpError(format!("TLS roots: {e}")))?
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Ok(Self { client, timeout })
    }

    /// The same client (its connections too), giving up after `timeout` instead.
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        Self {
            client: self.client.clone(),
            timeout,
        }
    }

    /// POST `body` as JSON to `url` with extra `headers`.
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Result<JsonAnswer, HttpError> {
        let mut request = hyper::Request::post(url).header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(
                serde_json::to_vec(body).unwrap_or_default(),
            )))
            .map_err(|e| HttpError(e.to_string()))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| HttpError(e.to_string()))?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| HttpError(e.to_string()))?
                .to_bytes();
            let body = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes)
                    .map_err(|e| HttpError(format!("answer is not JSON ({status}): {e}")))?
            };
            Ok(JsonAnswer {
                status,
                headers,
                body,
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| HttpError(format!("no answer within {:?}", self.timeout)))?
    }
}
