//! API key records. Only hashes are stored; the plain key is shown once, at creation.

use super::expr::Expr;
use super::{FirstAttempt, Item, StoreError, Written, get_n, guarded, n, req_n, req_s, s};
use crate::clock::Millis;
use crate::keys::{KeyId, KeyRecord};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;

#[derive(Clone)]
pub struct KeyStore {
    client: Client,
    table: String,
}

impl KeyStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Store a new key record. `false` if a key with the same id exists already.
    pub async fn insert(&self, record: &KeyRecord) -> Result<bool, StoreError> {
        let mut item = Item::new();
        item.insert("pk".into(), s(record.id.as_str()));
        item.insert("account".into(), s(&record.account));
        item.insert(
            "hash".into(),
            AttributeValue::B(Blob::new(record.hash.to_vec())),
        );
        item.insert("created".into(), n(record.created_at));
        if let Some(revoked) = record.revoked_at {
            item.insert("revoked".into(), n(revoked));
        }
        if record.admin {
            item.insert("admin".into(), AttributeValue::Bool(true));
        }
        let hash = item.get("hash").cloned();
        let send = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send();
        // A retry refused by this very key (its hash, of 32 random bytes): the first attempt
        // stored it. It used to be reported as an id already taken.
        let ours = |old: Option<&Item>| {
            Ok(match old.and_then(|i| i.get("hash")) == hash.as_ref() {
                true => FirstAttempt::Committed,
                false => FirstAttempt::NotCommitted,
            })
        };
        Ok(!matches!(guarded(send, ours).await?, Written::Refused(_)))
    }

    /// The record with this id, if any.
    pub async fn find(&self, id: &KeyId) -> Result<Option<KeyRecord>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(id.as_str()))
            .send()
            .await
            .map_err(StoreError::sdk)?;
        out.item().map(key_from_item).transpose()
    }

    /// Mark the key revoked at `now`. `false` if there is no such key. Revoking twice keeps the
    /// first time.
    pub async fn revoke(&self, id: &KeyId, now: Millis) -> Result<bool, StoreError> {
        let mut e = Expr::default();
        let revoked = e.name("revoked");
        let update = format!(
            "SET {revoked} = if_not_exists({revoked}, {now})",
            now = e.value("now", n(now))
        );
        let send = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(id.as_str()))
            .update_expression(update)
            .condition_expression("attribute_exists(pk)")
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .send();
        // Revoking again is harmless: a retry is refused only where there is no such key.
        let missing = |_: Option<&Item>| Ok(FirstAttempt::NotCommitted);
        Ok(!matches!(
            guarded(send, missing).await?,
            Written::Refused(_)
        ))
    }
}

fn key_from_item(item: &Item) -> Result<KeyRecord, StoreError> {
    let id = KeyId::parse(req_s(item, "pk")?)
        .ok_or_else(|| StoreError::Corrupt("key id is malformed".into()))?;
    let hash = match item.get("hash") {
        Some(AttributeValue::B(blob)) => <[u8; 32]>::try_from(blob.as_ref())
            .map_err(|_| StoreError::Corrupt("key hash is not 32 bytes".into()))?,
        _ => return Err(StoreError::Corrupt("key hash is missing".into())),
    };
    Ok(KeyRecord {
        id,
        account: req_s(item, "account")?.to_owned(),
        hash,
        created_at: req_n(item, "created")?,
        revoked_at: get_n(item, "revoked")?,
        admin: match item.get("admin") {
            None => false,
            Some(AttributeValue::Bool(admin)) => *admin,
            Some(_) => return Err(StoreError::Corrupt("key admin is not a boolean".into())),
        },
    })
}
