//! A page of `list` or `audit` for the tenant (docs/adr/0008): read from an index, so advisory;
//! its cursor names where it ended, sealed for the tenant and the op. No rounds: nothing is
//! written.

use super::super::cursor::Paged;
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::lease::answer::list_entries_within;
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
        let mut leases: Vec<_> = page
            .leases
            .iter()
            .map(|(name, state)| (name.clone(), as_of(state, now)))
            .collect();
        let mut next_after = page.next_after;
        // A page ends early when its entries would make it too large to answer: the next one
        // starts after the last entry it carries.
        let kept = list_entries_within(&leases, now);
        if kept < leases.len() {
            leases.truncate(kept);
            next_after = leases.last().map(|(name, _)| name.clone());
        }
        let next = next_after.map(|after| self.cursors.seal(tenant, Paged::List, &after));
        Ok(LeaseAnswer::listed(&leases, next, now))
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
