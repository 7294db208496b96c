//! The embedded store without a socket: the SDK client's HTTP layer (pluggable by design) hands
//! each DynamoDB request to dynoxide's engine in this process, and its answer back, as the wire
//! would. The service still speaks to the store only through the real SDK client (the same
//! requests, interceptors and error parsing as against AWS; one attempt, see [`client`]); what goes away is
//! a loopback TCP hop and two HTTP stacks per call, which measured as most of a local answer's
//! time (BENCHMARKS.md).
//!
//! The engine (`embedded_store`) runs the operations on a thread of its own under load, so the
//! runtime's workers go on parsing, signing and answering meanwhile; a lone call on a quiet store
//! runs on its caller's worker, saving two thread wake-ups.

use crate::embedded_store::Engine;
use aws_sdk_dynamodb::config::StalledStreamProtectionConfig;
use aws_sdk_dynamodb::config::http::{HttpRequest, HttpResponse};
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;

pub const TARGET_PREFIX: &str = "DynamoDB_20120810.";
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// An SDK HTTP client whose every request is served by the embedded store's engine.
#[derive(Clone)]
pub struct InProcess {
    engine: Engine,
}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InProcess(dynoxide)")
    }
}

impl InProcess {
    pub fn new(engine: Engine) -> Self {
        Self { engine }
    }
}

impl HttpConnector for InProcess {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let operation = request
            .headers()
            .get("x-amz-target")
            .and_then(|t| t.strip_prefix(TARGET_PREFIX))
            .unwrap_or_default();
        let body = request
            .body()
            .bytes()
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default();
        let operation = operation.to_owned();
        let body = body.to_owned();
        let this = self.clone();
        HttpConnectorFuture::new(async move {
            let (status, json) = this.engine.call(operation, body).await;
            let status = StatusCode::try_from(status)
                .map_err(|e| ConnectorError::other(Box::new(e), None))?;
            let mut response = HttpResponse::new(status, SdkBody::from(json));
            response.headers_mut().insert("content-type", CONTENT_TYPE);
            Ok(response)
        })
    }
}

impl HttpClient for InProcess {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

/// A DynamoDB client served in process by `engine`.
pub fn client(engine: Engine) -> aws_sdk_dynamodb::Client {
    // The endpoint is never dialled: the HTTP client answers every request itself. No
    // credentials, so no SigV4: a signature nobody checks would only cost CPU.
    //
    // One attempt, one timer: the engine in this process has no transient failure that a retry
    // would outlast (a failed fsync fails every later call), and the standard retry strategy's
    // bookkeeping and a second timer per attempt were measurable per call (BENCHMARKS.md, issue
    // #28). The whole call is still bounded, so a hung engine is a 502, never a hung request.
    // No stalled-stream watch either: a body here is bytes in memory, never a stream.
    let config = leasekit_core::store::local_config("http://embedded.invalid")
        .allow_no_auth()
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(leasekit_core::store::client::CALL_TIMEOUT)
                .build(),
        )
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
        .http_client(InProcess::new(engine));
    aws_sdk_dynamodb::Client::from_conf(config.build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::ProvideErrorMetadata;
    use leasekit_core::store::{LeaseKey, LeaseStore, Tables, ensure_tables};

    #[tokio::test]
    async fn the_sdk_reads_answers_and_errors_as_from_the_wire() {
        let client = client(Engine::memory());
        let tables = Tables::with_prefix("t-");
        ensure_tables(&client, &tables).await.unwrap();
        // A failed condition comes back as the SDK's typed error, with the old item.
        let store = LeaseStore::new(client.clone(), &tables.leases, &tables.requests);
        let tenant = leasekit_core::tenant::Tenant::for_key("a", "t").unwrap();
        let key = LeaseKey::new(&tenant, "r");
        let take = leasekit_core::lease::Write {
            guard: leasekit_core::lease::Guard::VacantAt { last_token: 0 },
            effect: leasekit_core::lease::Effect::Take {
                holder: "h".into(),
                expires_at: i64::MAX,
            },
        };
        let first = store.apply(&key, &take, 0).await.unwrap();
        assert!(matches!(first, leasekit_core::store::Applied::Committed(s) if s.last_token == 1));
        let second = store.apply(&key, &take, 0).await.unwrap();
        assert!(
            matches!(second, leasekit_core::store::Applied::GuardFailed(s) if s.last_token == 1)
        );
        // An operation this transport does not route is refused as DynamoDB refuses one.
        let err = client.list_tables().send().await.unwrap_err();
        assert_eq!(err.code(), Some("UnknownOperationException"), "{err:?}");
    }
}
