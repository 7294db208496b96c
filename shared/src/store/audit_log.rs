//! The audit of revokes (docs/adr/0008): one item per revoke in the requests table, written in
//! the revoke's own transaction, kept 90 days, and listed newest first through a sparse index
//! of its own.
//!
//! An entry's `pk` is `<tenant>|audit|<id>` (a requestId cannot contain `|`, so no record's key
//! is an entry's); `at` (`<tenant>#audit`) and `atm` (when, ms) are the index's keys, `ar` the
//! resource, `entry` the entry as JSON, and `ttl` (s) lets DynamoDB delete it after 90 days.
//! TTL only cleans up: a page leaves out entries older than 90 days by their time.

use super::expr::Expr;
use super::{Item, LeaseStore, StoreError, n, req_n, req_s, s};
use crate::clock::Millis;
use crate::lease::answer::AuditEntry;
use crate::tenant::Tenant;
use aws_sdk_dynamodb::types::{AttributeValue, Put};
use std::collections::HashMap;

/// The index's name.
pub const AUDIT_INDEX: &str = "audit-by-tenant";

/// How long an entry is kept (ms).
pub const AUDIT_KEPT_MS: Millis = 90 * 24 * 3600 * 1000;

/// Where an entry sits in its tenant's audit: what a cursor names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPosition {
    pub at: Millis,
    pub id: String,
}

/// A page of [`LeaseStore::audit`], newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPage {
    pub entries: Vec<(AuditEntry, AuditPosition)>,
    /// Whether older entries follow the page.
    pub more: bool,
}

fn entry_key(tenant: &Tenant, id: &str) -> String {
    format!("{tenant}|audit|{id}")
}

fn partition(tenant: &Tenant) -> String {
    format!("{tenant}#audit")
}

impl LeaseStore {
    /// The put of `entry` (made at `at`), for the revoke's transaction: it never overwrites.
    pub(crate) fn audit_put(
        &self,
        tenant: &Tenant,
        entry: &AuditEntry,
        at: Millis,
    ) -> Result<Put, StoreError> {
        let json = serde_json::to_string(entry)
            .map_err(|e| StoreError::Corrupt(format!("an audit entry would not serialize: {e}")))?;
        // `ar` is what an audit of one resource's entries filters on: a session's revoke has
        // none (its permits' resources are in `ended`).
        let mut put = Put::builder()
            .table_name(&self.requests)
            .item("pk", s(entry_key(tenant, &entry.id)))
            .item("at", s(partition(tenant)))
            .item("atm", n(at));
        if let Some(resource) = &entry.resource {
            put = put.item("ar", s(resource));
        }
        put.item("entry", s(json))
            .item("ttl", n((at + AUDIT_KEPT_MS).div_euclid(1000) + 3600))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(StoreError::built)
    }

    /// Up to `page_size` of `tenant`'s audit entries at `now`, newest first: of `resource` only
    /// when given, older than `before` (the last of the page before) when given.
    pub async fn audit(
        &self,
        tenant: &Tenant,
        resource: Option<&str>,
        before: Option<&AuditPosition>,
        page_size: usize,
        now: Millis,
    ) -> Result<AuditPage, StoreError> {
        let mut e = Expr::default();
        let (at, atm) = (e.name("at"), e.name("atm"));
        let condition = format!(
            "{at} = {} AND {atm} > {}",
            e.value("at", s(partition(tenant))),
            e.value("oldest", n(now - AUDIT_KEPT_MS)),
        );
        let filter = resource.map(|r| format!("{} = {}", e.name("ar"), e.value("ar", s(r))));
        let mut start: Option<HashMap<String, AttributeValue>> = before.map(|p| {
            HashMap::from([
                ("pk".to_owned(), s(entry_key(tenant, &p.id))),
                ("at".to_owned(), s(partition(tenant))),
                ("atm".to_owned(), n(p.at)),
            ])
        });
        let mut entries = Vec::new();
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.requests)
                .index_name(AUDIT_INDEX)
                .key_condition_expression(&condition)
                .set_filter_expression(filter.clone())
                .set_expression_attribute_names(e.names())
                .set_expression_attribute_values(e.values())
                .scan_index_forward(false)
                .limit(i32::try_from(page_size + 1).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(StoreError::sdk)?;
            for item in out.items() {
                entries.push(entry_from_item(item)?);
                if entries.len() > page_size {
                    entries.truncate(page_size);
                    return Ok(AuditPage {
                        entries,
                        more: true,
                    });
                }
            }
            match out.last_evaluated_key() {
                Some(key) => start = Some(key.clone()),
                None => {
                    return Ok(AuditPage {
                        entries,
                        more: false,
                    });
                }
            }
        }
    }
}

fn entry_from_item(item: &Item) -> Result<(AuditEntry, AuditPosition), StoreError> {
    let entry: AuditEntry = serde_json::from_str(req_s(item, "entry")?)
        .map_err(|e| StoreError::Corrupt(format!("an audit entry: {e}")))?;
    let position = AuditPosition {
        at: req_n(item, "atm")?,
        id: entry.id.clone(),
    };
    Ok((entry, position))
}
