//! The list of a tenant's live resources (docs/adr/0008): a sparse global secondary index of the
//! leases table, keys only, sharded by resource name so that one busy tenant is not held to one
//! index partition's write rate.
//!
//! A write that leaves a resource with a live permit or place sets its entry, `lt`
//! (`<tenant>#<shard>`, the index's partition key) and `lr` (the resource, its sort key); a
//! write that leaves it free removes them; an item without `lt` is not in the index. The index
//! projects nothing but its keys, so a renew (which changes only the expiry) writes nothing to
//! it: DynamoDB writes an index only when an item's key or projected attributes change. What a
//! resource an entry names holds is read from the table itself, strongly consistent, for the
//! page's names only.
//!
//! A lapse writes nothing, so an entry can outlive its lease: a page skips the resources it
//! finds free, and tidies a few of them out of the index (a REMOVE guarded on the resource
//! still being free), so that a tenant's lapsed leases cost its pages only until tidied.
//!
//! The index is eventually consistent (DynamoDB: "usually within a second"; dynoxide updates it
//! in the write's own transaction): a new grant may be missing from a page for that long, and
//! list is advisory; `get` and `check` are authoritative.

use super::expr::Expr;
pub use super::lease_item::SHARDS;
use super::lease_item::conditions::listed_and_free;
use super::lease_item::{lease_from_item, shard_of};
use super::{Item, LeaseKey, LeaseStore, StoreError, n, req_s, s};
use crate::clock::Millis;
use crate::lease::LeaseState;
use crate::tenant::Tenant;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use std::collections::HashMap;

/// The index's name.
pub const LISTED_INDEX: &str = "by-tenant";

/// Free resources one page tidies out of the index at most.
const TIDY_PER_PAGE: usize = 25;

/// Keys one BatchGetItem reads at most.
const BATCH_GET_MAX: usize = 100;

/// Rounds of a page at most (each reads the shards once more past what it found free): bounds
/// a page over many lapsed entries not yet tidied.
const MAX_PAGE_ROUNDS: usize = 8;

/// A page of [`LeaseStore::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// The live resources, by name, with their state.
    pub leases: Vec<(String, LeaseState)>,
    /// Where the next page starts (after this name), or `None` at the end. Usually the page's
    /// last name; past many free entries not yet tidied, the last one read, so that a page
    /// may be short (even empty) and still not the last.
    pub next_after: Option<String>,
}

impl LeaseStore {
    /// Up to `page_size` of `tenant`'s resources with a live permit or place at `now`, by name:
    /// those starting with `prefix`, after `after` (the last name of the page before). Each
    /// round takes the first names after where the last ended from every shard at once (their
    /// merge holds every name of the page), reads those resources in one consistent batch, and
    /// keeps the live ones; free ones send it round again, a few times at most.
    pub async fn list(
        &self,
        tenant: &Tenant,
        prefix: &str,
        after: Option<&str>,
        page_size: usize,
        now: Millis,
    ) -> Result<ListPage, StoreError> {
        // A cursor before the prefix's names (another prefix's page) starts at the prefix.
        let mut after = after.filter(|a| *a >= prefix).map(str::to_owned);
        let mut leases = Vec::new();
        let mut tidied = 0;
        let mut ended = false;
        for round in 0..MAX_PAGE_ROUNDS {
            // Each round past the first reads more at once: it met free entries.
            let needed = page_size + 1 - leases.len();
            let want = (needed << round.min(7)).min(BATCH_GET_MAX);
            let reads = (0..SHARDS).map(|shard| {
                let partition = shard_of(tenant.as_str(), shard);
                let after = after.as_deref();
                async move { self.shard_names(&partition, prefix, after, want).await }
            });
            let mut names = Vec::new();
            let mut exhausted = true;
            for shard in futures_util::future::join_all(reads).await {
                let (found, ended) = shard?;
                exhausted &= ended;
                names.extend(found);
            }
            names.sort();
            // Past the `want`-th name, a shard may hold names it did not give: not yet.
            if names.len() > want {
                names.truncate(want);
                exhausted = false;
            }
            let Some(last) = names.last().cloned() else {
                ended = true;
                break;
            };
            let keys: Vec<LeaseKey> = names.iter().map(|r| LeaseKey::new(tenant, r)).collect();
            let states = self.read_many(&keys).await?;
            let stored: Vec<LeaseState> = keys
                .iter()
                .map(|key| states.get(&key.0).cloned().unwrap_or_default())
                .collect();
            // A session's permits live as long as their sessions (docs/adr/0010).
            let states = self.through_sessions(&keys, stored, None, now).await?;
            let mut free = Vec::new();
            for ((name, key), state) in names.into_iter().zip(&keys).zip(states) {
                // A finished resource is listed while its mark stands (docs/adr/0012).
                if state.live(now).is_some()
                    || state.live_waiters(now).next().is_some()
                    || state.finished(now).is_some()
                {
                    leases.push((name, state));
                } else if tidied < TIDY_PER_PAGE {
                    tidied += 1;
                    free.push(key);
                }
            }
            // At once, not one round trip after another: a page past many lapsed entries.
            futures_util::future::join_all(free.into_iter().map(|key| self.tidy(key, now))).await;
            after = Some(last);
            if leases.len() > page_size {
                break;
            }
            if exhausted {
                ended = true;
                break;
            }
        }
        if leases.len() > page_size {
            leases.truncate(page_size);
            let last = leases.last().map(|(name, _)| name.clone());
            return Ok(ListPage {
                leases,
                next_after: last,
            });
        }
        // Out of rounds before the page filled: the next page goes on from the last name read.
        Ok(ListPage {
            leases,
            next_after: if ended { None } else { after },
        })
    }

    /// The first `want` names of one index partition after `after` (or from the start of
    /// `prefix`), in order, and whether the partition has no more in range.
    async fn shard_names(
        &self,
        partition: &str,
        prefix: &str,
        after: Option<&str>,
        want: usize,
    ) -> Result<(Vec<String>, bool), StoreError> {
        let mut e = Expr::default();
        let (lt, lr) = (e.name("lt"), e.name("lr"));
        let mut condition = format!("{lt} = {}", e.value("lt", s(partition)));
        match (after, prefix) {
            (Some(after), _) => {
                condition += &format!(" AND {lr} > {}", e.value("after", s(after)));
            }
            (None, "") => {}
            (None, prefix) => {
                condition += &format!(" AND begins_with({lr}, {})", e.value("prefix", s(prefix)));
            }
        }
        let e = e.used_in(&[&condition]);
        let mut names = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.leases)
                .index_name(LISTED_INDEX)
                .key_condition_expression(&condition)
                .set_expression_attribute_names(e.names())
                .set_expression_attribute_values(e.values())
                .limit(i32::try_from(want).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(StoreError::sdk)?;
            for item in out.items() {
                let name = req_s(item, "lr")?;
                // Past the prefix (read after a cursor, names in order): the range is done.
                if !name.starts_with(prefix) {
                    return Ok((names, true));
                }
                names.push(name.to_owned());
                if names.len() >= want {
                    return Ok((names, false));
                }
            }
            match out.last_evaluated_key() {
                Some(key) => start = Some(key.clone()),
                None => return Ok((names, true)),
            }
        }
    }

    /// The resources of `keys`, strongly consistent, by key (absent: never written).
    async fn read_many(
        &self,
        keys: &[LeaseKey],
    ) -> Result<HashMap<String, LeaseState>, StoreError> {
        let mut states = HashMap::with_capacity(keys.len());
        for chunk in keys.chunks(BATCH_GET_MAX) {
            let mut pending: Vec<Item> = chunk
                .iter()
                .map(|k| HashMap::from([("pk".to_owned(), s(&k.0))]))
                .collect();
            // Keys DynamoDB left unprocessed (throttled) are asked again, a few times.
            for _ in 0..5 {
                if pending.is_empty() {
                    break;
                }
                let wanted = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut pending)))
                    .consistent_read(true)
                    .build()
                    .map_err(StoreError::built)?;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.leases, wanted)
                    .send()
                    .await
                    .map_err(StoreError::sdk)?;
                for item in out
                    .responses()
                    .and_then(|r| r.get(&self.leases))
                    .into_iter()
                    .flatten()
                {
                    states.insert(req_s(item, "pk")?.to_owned(), lease_from_item(Some(item))?);
                }
                pending = out
                    .unprocessed_keys()
                    .and_then(|u| u.get(&self.leases))
                    .map(|k| k.keys().to_vec())
                    .unwrap_or_default();
            }
            if !pending.is_empty() {
                return Err(StoreError::Unavailable(
                    "the store left part of a list page unread".into(),
                ));
            }
        }
        Ok(states)
    }

    /// Take a free resource out of the index, if it is still free (no live permit or place).
    /// Best effort: a failure leaves it for the next page, which skips it too.
    async fn tidy(&self, key: &LeaseKey, now: Millis) {
        let mut e = Expr::default();
        let (lt, lr) = (e.name("lt"), e.name("lr"));
        let now = e.value("now", n(now));
        let condition = listed_and_free(&mut e, &now);
        let update = format!("REMOVE {lt}, {lr}");
        let tidied = self
            .client
            .update_item()
            .table_name(&self.leases)
            .key("pk", s(&key.0))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .send()
            .await;
        if let Err(err) = tidied {
            tracing::debug!(error = %StoreError::sdk(err), "a free resource's list entry was not tidied");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lease_item::shard_key;

    #[test]
    fn a_tenants_resources_spread_over_every_shard() {
        let shards: std::collections::HashSet<String> = (0..400)
            .map(|i| shard_key("key:a:t", &format!("job-{i}")))
            .collect();
        assert_eq!(shards.len(), usize::from(SHARDS));
        assert!(shards.iter().all(|s| s.starts_with("key:a:t#")));
        // Stable: the same name always lands in the same shard.
        assert_eq!(shard_key("t", "deploy:prod"), shard_key("t", "deploy:prod"));
    }
}
