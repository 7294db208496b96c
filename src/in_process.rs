//! The embedded store without a socket: the SDK client's HTTP layer (pluggable by design) hands
//! each DynamoDB request to dynoxide's engine in this process, and its answer back, as the wire
//! would. The service still speaks to the store only through the real SDK client (the same
//! requests, signing, retries, interceptors and error parsing as against AWS); what goes away is
//! a loopback TCP hop and two HTTP stacks per call, which measured as most of a local answer's
//! time (BENCHMARKS.md).
//!
//! dynoxide runs each operation to completion on the thread that calls it, holding the database
//! (one writer at a time, each commit fsynced); here that thread is one of the runtime's blocking
//! threads, never a worker (measured: 1,130 -> 1,750 cycles/s at 16 clients).
//! Only the operations this service sends are routed; any other is refused as DynamoDB refuses an
//! unknown operation. Inputs come from the SDK, so they are well formed: a body that does not
//! decode is answered with a SerializationException, as dynoxide's server would.

use aws_sdk_dynamodb::config::http::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use dynoxide::{Database, DynoxideError};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub const TARGET_PREFIX: &str = "DynamoDB_20120810.";
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// An SDK HTTP client whose every request is served by `database`.
#[derive(Clone)]
pub struct InProcess {
    database: Database,
}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InProcess(dynoxide)")
    }
}

impl InProcess {
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// The status and JSON body DynamoDB would answer `operation` with.
    pub fn serve(&self, operation: &str, body: &str) -> (u16, String) {
        let db = &self.database;
        let result = match operation {
            "GetItem" => run(body, |r| db.get_item(r)),
            "PutItem" => run(body, |r| db.put_item(r)),
            "UpdateItem" => run(body, |r| db.update_item(r)),
            "DeleteItem" => run(body, |r| db.delete_item(r)),
            "Query" => run(body, |r| db.query(r)),
            "Scan" => run(body, |r| db.scan(r)),
            "TransactGetItems" => run(body, |r| db.transact_get_items(r)),
            "TransactWriteItems" => run(body, |r| db.transact_write_items(r)),
            "CreateTable" => run(body, |r| db.create_table(r)),
            "DescribeTable" => run(body, |r| db.describe_table(r)),
            "UpdateTable" => run(body, |r| db.update_table(r)),
            "UpdateTimeToLive" => run(body, |r| db.update_time_to_live(r)),
            _ => {
                return (
                    400,
                    r#"{"__type":"com.amazon.coral.service#UnknownOperationException"}"#.into(),
                );
            }
        };
        match result {
            Ok(json) => (200, json),
            Err(e) => (e.status_code(), e.to_json()),
        }
    }
}

/// Decode the request, run it, encode the answer.
fn run<Q, A>(body: &str, op: impl FnOnce(Q) -> dynoxide::Result<A>) -> dynoxide::Result<String>
where
    Q: DeserializeOwned,
    A: Serialize,
{
    let request = serde_json::from_str(body)
        .map_err(|e| DynoxideError::SerializationException(e.to_string()))?;
    let answer = op(request)?;
    serde_json::to_string(&answer).map_err(|e| DynoxideError::InternalServerError(e.to_string()))
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
            // On a blocking thread: an operation holds the database (and waits for its fsync)
            // without holding up the runtime's workers, which go on parsing, signing and
            // answering other requests meanwhile.
            let (status, json) = tokio::task::spawn_blocking(move || this.serve(&operation, &body))
                .await
                .unwrap_or_else(|e| {
                    let error = DynoxideError::InternalServerError(e.to_string());
                    (error.status_code(), error.to_json())
                });
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

/// A DynamoDB client served in process by `database`.
pub fn client(database: Database) -> aws_sdk_dynamodb::Client {
    // The endpoint is never dialled: the HTTP client answers every request itself. No
    // credentials, so no SigV4: a signature nobody checks would only cost CPU.
    let config = leasekit_core::store::local_config("http://embedded.invalid")
        .allow_no_auth()
        .http_client(InProcess::new(database));
    aws_sdk_dynamodb::Client::from_conf(config.build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::ProvideErrorMetadata;
    use leasekit_core::store::{LeaseKey, LeaseStore, Tables, ensure_tables};

    #[tokio::test]
    async fn the_sdk_reads_answers_and_errors_as_from_the_wire() {
        let client = client(Database::memory().unwrap());
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
