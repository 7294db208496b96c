//! Table names, and creating the tables where they are missing (local runs and tests; on AWS the
//! SAM template creates them).

use super::StoreError;
use super::audit_log::AUDIT_INDEX;
use super::lease_index::LISTED_INDEX;
use super::payment_store::PENDING_INDEX;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, CreateGlobalSecondaryIndexAction, GlobalSecondaryIndexUpdate,
    IndexStatus, KeySchemaElement, KeyType, Projection, ProjectionType, ScalarAttributeType,
    TableStatus, TimeToLiveSpecification,
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
    // The sparse indexes: the payments ledger's open items, the tenant's listed leases and its
    // audit entries. A data dir from before one existed gets it added.
    let (s, n) = (ScalarAttributeType::S, ScalarAttributeType::N);
    for (table, index, hash, range, projection) in [
        (
            &tables.payments,
            PENDING_INDEX,
            "pending",
            ("accepted", n.clone()),
            ProjectionType::All,
        ),
        (
            &tables.leases,
            LISTED_INDEX,
            "lt",
            ("lr", s.clone()),
            ProjectionType::KeysOnly,
        ),
        (
            &tables.requests,
            AUDIT_INDEX,
            "at",
            ("atm", n),
            ProjectionType::All,
        ),
    ] {
        ensure_index(client, table, index, hash, range, projection).await?;
    }
    Ok(())
}

/// Add the index `name` (partition key `hash`, a string; sort key `range`) to `table` unless
/// it has it.
async fn ensure_index(
    client: &Client,
    table: &str,
    name: &str,
    hash: &str,
    range: (&str, ScalarAttributeType),
    projection: ProjectionType,
) -> Result<(), StoreError> {
    let described = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(StoreError::sdk)?;
    let exists = described
        .table()
        .map(|t| t.global_secondary_indexes())
        .unwrap_or_default()
        .iter()
        .any(|i| i.index_name() == Some(name));
    if exists {
        return Ok(());
    }
    let attribute = |name: &str, kind: ScalarAttributeType| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(kind)
            .build()
            .map_err(StoreError::built)
    };
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .map_err(StoreError::built)
    };
    let index = CreateGlobalSecondaryIndexAction::builder()
        .index_name(name)
        .key_schema(key(hash, KeyType::Hash)?)
        .key_schema(key(range.0, KeyType::Range)?)
        .projection(Projection::builder().projection_type(projection).build())
        .build()
        .map_err(StoreError::built)?;
    client
        .update_table()
        .table_name(table)
        .attribute_definitions(attribute("pk", ScalarAttributeType::S)?)
        .attribute_definitions(attribute(hash, ScalarAttributeType::S)?)
        .attribute_definitions(attribute(range.0, range.1)?)
        .global_secondary_index_updates(GlobalSecondaryIndexUpdate::builder().create(index).build())
        .send()
        .await
        .map_err(StoreError::sdk)?;
    wait_active(client, table).await
}

async fn create_if_missing(client: &Client, name: &str, ttl: bool) -> Result<(), StoreError> {
    let created = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("pk")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(StoreError::built)?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(KeyType::Hash)
                .build()
                .map_err(StoreError::built)?,
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
                    .map_err(StoreError::built)?,
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
        let table = out.table();
        let indexes_active = table.is_some_and(|t| {
            t.global_secondary_indexes()
                .iter()
                .all(|i| i.index_status().is_none_or(|s| *s == IndexStatus::Active))
        });
        if table.and_then(|t| t.table_status()) == Some(&TableStatus::Active) && indexes_active {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(StoreError::Unavailable(format!(
        "table {name} did not become active within 60 s"
    )))
}
