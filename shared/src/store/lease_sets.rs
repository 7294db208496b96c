//! Sets of leases: read together in one consistent snapshot, written together in one
//! transaction (docs/adr/0006), so no moment exists at which part of a set is held because of
//! a request.

use super::lease_store::{lease_from_item, record_from_item};
use super::usage::{add as add_usage, measured};
use super::{
    Cancelled, Committed, LeaseKey, LeaseStore, RecordKey, StoreError, StoredRecord, s, transaction,
};
use crate::clock::Millis;
use crate::lease::{LeaseState, Write};
use aws_sdk_dynamodb::types::{Get, Put, TransactGetItem, TransactWriteItem};

/// The outcome of committing a set's writes with its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetCommitted {
    Yes,
    /// A live record for this requestId exists already: answer from it.
    RecordExists(StoredRecord),
    /// A guard did not hold, or another request was writing one of the items: read again.
    Changed,
}

impl LeaseStore {
    /// The leases of `keys` and the live record of `record`, if asked, in one consistent
    /// snapshot (TransactGetItems: at most 100 items, and a set has at most 50).
    pub async fn read_set(
        &self,
        keys: &[LeaseKey],
        record: Option<&RecordKey>,
        now: Millis,
    ) -> Result<(Vec<LeaseState>, Option<StoredRecord>), StoreError> {
        let get = |table: &str, pk: &str| {
            Get::builder()
                .table_name(table)
                .key("pk", s(pk))
                .build()
                .map(|g| TransactGetItem::builder().get(g).build())
                .map_err(StoreError::built)
        };
        let mut items = Vec::with_capacity(keys.len() + 1);
        for key in keys {
            items.push(get(&self.leases, &key.0)?);
        }
        if let Some(record) = record {
            items.push(get(&self.requests, &record.0)?);
        }
        let out = self
            .client
            .transact_get_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map_err(StoreError::sdk)?;
        let responses = out.responses();
        let item = |i: usize| responses.get(i).and_then(|r| r.item());
        let states = (0..keys.len())
            .map(|i| lease_from_item(item(i)))
            .collect::<Result<Vec<_>, _>>()?;
        let record = match record {
            Some(_) => item(keys.len())
                .map(record_from_item)
                .transpose()?
                .filter(|r| r.expires_at > now),
            None => None,
        };
        Ok((states, record))
    }

    /// Commit every write of a set, the items of `also` (a revoke's audit entry), and the record
    /// if given, in one transaction: all or none. With nothing else (a denial), only the record
    /// is put.
    pub async fn commit_set(
        &self,
        writes: &[(LeaseKey, Write)],
        also: Vec<Put>,
        record: Option<(&RecordKey, &StoredRecord)>,
        now: Millis,
    ) -> Result<SetCommitted, StoreError> {
        let put = record
            .map(|(key, stored)| self.record_put(key, stored, true, now))
            .transpose()?;
        let record_at = writes.len() + also.len();
        if record_at == 0 {
            let (Some(put), Some((_, stored))) = (put, record) else {
                return Ok(SetCommitted::Yes);
            };
            return Ok(match self.put_record_alone(put, stored).await? {
                Committed::Yes => SetCommitted::Yes,
                Committed::RecordExists(found) => SetCommitted::RecordExists(found),
                Committed::LeaseChanged(_) => SetCommitted::Changed,
            });
        }
        let mut items = Vec::with_capacity(writes.len() + 1);
        for (key, write) in writes {
            items.push(
                TransactWriteItem::builder()
                    .update(self.update(key, write, now)?)
                    .build(),
            );
        }
        for put in also.into_iter().chain(put) {
            items.push(TransactWriteItem::builder().put(put).build());
        }
        let send = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send();
        let (result, usage) = measured(Box::pin(send)).await;
        add_usage(usage);
        let reasons = match transaction(result)? {
            Ok(_) => return Ok(SetCommitted::Yes),
            Err(reasons) => reasons,
        };
        // The record first, as for one lease: if it exists its answer stands; if it is this
        // very record after a retry the SDK made, the first attempt committed.
        if let (Some((_, stored)), Some(Cancelled::Condition(Some(item)))) =
            (record, reasons.get(record_at))
        {
            return Ok(match record_from_item(item)? {
                found if usage.unsure_retries() > 0 && found == *stored => SetCommitted::Yes,
                found => SetCommitted::RecordExists(found),
            });
        }
        Ok(SetCommitted::Changed)
    }
}
