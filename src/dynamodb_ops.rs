//! The DynamoDB operations the embedded store answers, routed to dynoxide: the JSON the SDK
//! sends in, the JSON (and status) DynamoDB would send back. No threads, no grouping: the engine
//! ([`crate::embedded_store`]) decides when each runs.

use crate::client_tokens::Answer;
use dynoxide::{Database, DynoxideError};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Operations that never write: a group of only these needs no flush.
pub fn is_read(operation: &str) -> bool {
    matches!(
        operation,
        "GetItem" | "BatchGetItem" | "Query" | "Scan" | "TransactGetItems" | "DescribeTable"
    )
}

/// The answer DynamoDB would give `operation`. Only the operations this service sends are
/// routed; any other is refused as DynamoDB refuses an unknown operation. Inputs come from the
/// SDK, so they are well formed: a body that does not decode is answered with a
/// SerializationException, as dynoxide's server would.
pub fn serve(db: &Database, operation: &str, body: &str) -> Answer {
    let result = match operation {
        "GetItem" => run_op(body, |r| db.get_item(r)),
        "BatchGetItem" => run_op(body, |r| db.batch_get_item(r)),
        "PutItem" => run_op(body, |r| db.put_item(r)),
        "UpdateItem" => run_op(body, |r| db.update_item(r)),
        "DeleteItem" => run_op(body, |r| db.delete_item(r)),
        "Query" => run_op(body, |r| db.query(r)),
        "Scan" => run_op(body, |r| db.scan(r)),
        "TransactGetItems" => run_op(body, |r| db.transact_get_items(r)),
        "TransactWriteItems" => run_op(body, |r| db.transact_write_items(r)),
        "CreateTable" => run_op(body, |r| db.create_table(r)),
        "DescribeTable" => run_op(body, |r| db.describe_table(r)),
        "UpdateTable" => run_op(body, |r| db.update_table(r)),
        "UpdateTimeToLive" => run_op(body, |r| db.update_time_to_live(r)),
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

/// Decode the request, run it, encode the answer.
fn run_op<Q, A>(body: &str, op: impl FnOnce(Q) -> dynoxide::Result<A>) -> dynoxide::Result<String>
where
    Q: DeserializeOwned,
    A: Serialize,
{
    let request = serde_json::from_str(body)
        .map_err(|e| DynoxideError::SerializationException(e.to_string()))?;
    let answer = op(request)?;
    serde_json::to_string(&answer).map_err(|e| DynoxideError::InternalServerError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_or_malformed_operation_is_refused_as_dynamodb_refuses_it() {
        let db = Database::memory().unwrap();
        let (status, body) = serve(&db, "DeleteTable", "{}");
        assert_eq!(status, 400);
        assert!(body.contains("UnknownOperationException"), "{body}");
        let (status, body) = serve(&db, "GetItem", "not json");
        assert_eq!(status, 400);
        assert!(body.contains("SerializationException"), "{body}");
    }

    #[test]
    fn every_routed_operation_is_read_or_write_as_dynamodb_defines_it() {
        for read in [
            "GetItem",
            "BatchGetItem",
            "Query",
            "Scan",
            "TransactGetItems",
            "DescribeTable",
        ] {
            assert!(is_read(read), "{read}");
        }
        for write in [
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            "TransactWriteItems",
            "CreateTable",
            "UpdateTable",
            "UpdateTimeToLive",
        ] {
            assert!(!is_read(write), "{write}");
        }
    }
}
