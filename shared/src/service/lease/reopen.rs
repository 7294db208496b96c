//! A reopen (docs/adr/0012): a finished resource's mark ends early. Decided on a read and
//! committed in one transaction with its audit entry (and its record, with a requestId), as a
//! revoke is. Its finisher may (naming itself and the token it finished with), and an admin:
//! who else asks is refused (403) on the read, with nothing written.

use super::answers::record_put;
use super::rounds::{Attempt, Given, Planner, Target};
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::clock::iso8601;
use crate::lease::LeaseAnswer;
use crate::lease::answer::{AuditEntry, DoneView};
use crate::lease::decide::{Reopening, finished_by, reopen};
use crate::store::call_id;

/// Why a reopen is refused to its caller.
const FORBIDDEN: &str = "only the holder that finished the resource, with the token it finished with, an admin key or the paying wallet may reopen it";

struct ReopenPlanner<'a> {
    target: &'a Target,
    resource: &'a str,
    reason: &'a str,
    finisher: Option<(&'a str, u64)>,
    call: &'a Call<'a>,
    service: &'a LeaseService,
}

impl Planner for ReopenPlanner<'_> {
    type Decision = SignedAnswer;

    fn plan(&mut self, given: Given<'_>) -> Result<Attempt<SignedAnswer>, LeaseError> {
        let state = &given.leases[0];
        let (signing, actor) = (&self.call.signing, self.call.actor);
        let now = signing.now;
        if !actor.admin && !finished_by(state, self.finisher, now) {
            return Err(LeaseError::Forbidden(FORBIDDEN));
        }
        let key = &self.target.keys[0];
        let op = self.call.request.op;
        let (answer, writes, audit, leaves) = match reopen(state, self.finisher, now) {
            Reopening::End(write, done) => {
                let after = write.effect.apply(state);
                let entry = AuditEntry {
                    id: call_id()?,
                    at: iso8601(now),
                    actor: actor.id.to_owned(),
                    resource: Some(self.resource.to_owned()),
                    session: None,
                    ended: Vec::new(),
                    reason: self.reason.to_owned(),
                    reopened: Some(DoneView::of(&done)),
                };
                (
                    LeaseAnswer::granted(op, &after, None, now),
                    vec![(key.clone(), write)],
                    vec![(actor.tenant.clone(), entry)],
                    vec![(key.clone(), after)],
                )
            }
            Reopening::Deny(witnesses) => {
                let answer = LeaseAnswer::denied(op, state, None, now, witnesses);
                (answer, Vec::new(), Vec::new(), Vec::new())
            }
        };
        let answer = self.service.sign(answer, signing)?;
        let record = record_put(self.target, Some(&answer), signing, true)?;
        Ok(Attempt::together(writes, audit, record, leaves, answer))
    }
}

impl LeaseService {
    pub(super) async fn reopen(
        &self,
        call: &Call<'_>,
        resource: &str,
        finisher: Option<(&str, u64)>,
    ) -> Result<SignedAnswer, LeaseError> {
        // Naming no finisher, only an admin may: refused before anything is read, so that no
        // one else is replayed an admin's reopen under its requestId either (the attack of
        // 2026-12-06).
        if finisher.is_none() && !call.actor.admin {
            return Err(LeaseError::Forbidden(FORBIDDEN));
        }
        let reason = call
            .request
            .reason
            .as_deref()
            .ok_or(LeaseError::Missing("reason"))?;
        let target = call.target([resource]);
        let _turn = self.waits.turn(&target.keys[0]).await;
        let mut planner = ReopenPlanner {
            target: &target,
            resource,
            reason,
            finisher,
            call,
            service: self,
        };
        self.answered(call, &target, &mut planner).await
    }
}
