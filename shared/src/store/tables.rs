//! Table names, and creating the tables where they are missing (local runs and tests; on AWS the
//! SAM template creates them).

use super::StoreError;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
    TimeToLiveSpecification,
};
use std::time::Duration;

/// The names of the service's tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    pub leases: String,
    pub requests: String,
    pub keys: String,
    pub payments: String,
    pub claims: String,
}

impl Tables {
    /// `<prefix>leases`, `<prefix>requests`, `<prefix>keys`, `<prefix>payments`, `<prefix>claims`.
    pub fn with_prefix(prefix: &str) -> Self {
        Self {
            leases: format!("{prefix}leases"),
            requests: format!("{prefix}requests"),
            keys: format!("{prefix}keys"),
            payments: format!("{prefix}payments"),
            claims: format!("{prefix}claims"),
        }
    }
}

/// The TTL attribute of the requests table (epoch seconds).
pub const TTL_ATTRIBUTE: &str = "ttl";

/// Create any missing table (on-demand, `pk` string key), turn TTL on for request records, and
/// wait until every table is active.
pub async fn ensure_tables(client: &Client, tables: &Tables) -> Result<(), StoreError> {
    for (name, ttl) in [
        (&tables.leases, false),
        (&tables.requests, true),
        (&tables.keys, false),
        (&tables.payments, false),
        (&tables.claims, true),
    ] {
        create_if_missing(client, name, ttl).await?;
    }
    Ok(())
}

async fn create_if_missing(client: &Client, name: &str, ttl: bool) -> Result<(), StoreError> {
    let built = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Unavailable(e.to_string());
    let created = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("pk")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(built)?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(KeyType::Hash)
                .build()
                .map_err(built)?,
        )
        .send()
        .await;
    match created {
        Ok(_) => {}
        Err(err)
            if matches!(
                err.as_service_error(),
                Some(CreateTableError::ResourceInUseException(_))
            ) =>
        {
            return Ok(());
        }
        Err(err) => return Err(StoreError::sdk(err)),
    }
    wait_active(client, name).await?;
    if ttl {
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(TTL_ATTRIBUTE)
                    .enabled(true)
                    .build()
                    .map_err(built)?,
            )
            .send()
            .await
            .map_err(StoreError::sdk)?;
    }
    Ok(())
}

async fn wait_active(client: &Client, name: &str) -> Result<(), StoreError> {
    for _ in 0..120 {
        let out = client
            .describe_table()
            .table_name(name)
            .send()
            .await
            .map_err(StoreError::sdk)?;
        if out.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(StoreError::Unavailable(format!(
        "table {name} did not become active within 60 s"
    )))
}
