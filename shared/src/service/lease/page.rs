//! A page of `list` or `audit` for the tenant (docs/adr/0008): read from an index, so advisory;
//! its cursor names where it ended, sealed for the tenant and the op. No rounds: nothing is
//! written.

use super::super::cursor::Paged;
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::clock::Millis;
use crate::lease::answer::{SetMember, list_entry};
use crate::lease::request::DEFAULT_PAGE_SIZE;
use crate::lease::{LeaseAnswer, Op, as_of};
use crate::store::audit_log::AuditPosition;
use crate::tenant::Tenant;

impl LeaseService {
    pub(super) async fn page(&self, call: &Call<'_>) -> Result<SignedAnswer, LeaseError> {
        let (tenant, request) = (call.actor.tenant, call.request);
        let page_size = request.page_size.unwrap_or(DEFAULT_PAGE_SIZE) as usize;
        let paged = match request.op {
            Op::Audit => Paged::Audit,
            _ => Paged::List,
        };
        let after = match &request.cursor {
            Some(cursor) => Some(
                self.cursors
                    .open(tenant, paged, cursor)
                    .ok_or(LeaseError::BadCursor)?,
            ),
            None => None,
        };
        let answer = match paged {
            Paged::List => {
                let prefix = request.prefix.as_deref().unwrap_or("");
                self.list(tenant, prefix, after.as_deref(), page_size, call)
                    .await?
            }
            Paged::Audit => {
                self.audit(tenant, after.as_deref(), page_size, call)
                    .await?
            }
        };
        self.sign(answer, &call.signing)
    }

    async fn list(
        &self,
        tenant: &Tenant,
        prefix: &str,
        after: Option<&str>,
        page_size: usize,
        call: &Call<'_>,
    ) -> Result<LeaseAnswer, LeaseError> {
        let now = call.signing.now;
        let page = self
            .store
            .list(tenant, prefix, after, page_size, now)
            .await?;
        let (entries, ended_early) = entries_within(&page.leases, now);
        // A page that ends early starts the next after the last entry it carries.
        let next_after = match ended_early {
            true => entries.last().map(|entry| entry.resource.clone()),
            false => page.next_after,
        };
        let next = next_after.map(|after| self.cursors.seal(tenant, Paged::List, &after));
        Ok(LeaseAnswer::listed(entries, next, now))
    }

    async fn audit(
        &self,
        tenant: &Tenant,
        after: Option<&str>,
        page_size: usize,
        call: &Call<'_>,
    ) -> Result<LeaseAnswer, LeaseError> {
        let now = call.signing.now;
        // A position is `<ms>:<id>`, as this service sealed it.
        let before = match after.map(|a| a.split_once(':')) {
            None => None,
            Some(Some((at, id))) => Some(AuditPosition {
                at: at.parse().map_err(|_| LeaseError::BadCursor)?,
                id: id.to_owned(),
            }),
            Some(None) => return Err(LeaseError::BadCursor),
        };
        let resource = call.request.resource.as_deref();
        let page = self
            .store
            .audit(tenant, resource, before.as_ref(), page_size, now)
            .await?;
        let next = match (page.more, page.entries.last()) {
            (true, Some((_, at))) => {
                let position = format!("{}:{}", at.at, at.id);
                Some(self.cursors.seal(tenant, Paged::Audit, &position))
            }
            _ => None,
        };
        let entries = page.entries.into_iter().map(|(entry, _)| entry).collect();
        Ok(LeaseAnswer::audited(entries, next, now))
    }
}

/// The most bytes of entries a `list` page carries (at least one entry, whatever its size): a
/// page of 100 semaphores crowded with long values would otherwise be tens of MB, past what a
/// Lambda function can answer (6 MiB), and no cursor could get past it. The largest entry (64
/// holders and 64 waiters with the longest holders and values, escaped) is about 0.5 MB.
pub const LIST_PAGE_BYTES: usize = 1 << 20;

/// The list entries of `page`'s resources as of `now`, from the first, as many as fit in
/// [`LIST_PAGE_BYTES`] as JSON (at least one), and whether that left any out.
fn entries_within(
    page: &[(String, crate::lease::LeaseState)],
    now: Millis,
) -> (Vec<SetMember>, bool) {
    let mut entries = Vec::with_capacity(page.len());
    let mut bytes = 0;
    for (resource, state) in page {
        let entry = list_entry(resource, &as_of(state, now), now);
        // Serializing a struct of strings and numbers to memory does not fail.
        bytes += serde_json::to_vec(&entry).map_or(0, |json| json.len() + 1);
        if bytes > LIST_PAGE_BYTES && !entries.is_empty() {
            return (entries, true);
        }
        entries.push(entry);
    }
    (entries, false)
}
