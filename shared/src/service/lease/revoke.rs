//! A revoke (docs/adr/0008): an operator ends a holder's permit, or every permit, of one
//! resource. Decided on a read and committed in one transaction with its audit entry (and its
//! record, with a requestId), so that no permit is ever ended without its entry. Only an admin
//! may call it: the edge decides that before the service is asked (`http::lease`). The write
//! brings the resource up to now, so its waiters are served in it.

use super::answers::record_put;
use super::rounds::{Attempt, Given, Planner, Target};
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::clock::{Millis, iso8601};
use crate::lease::answer::{AuditEntry, Holder};
use crate::lease::decide::{Revocation, revoke};
use crate::lease::{LeaseAnswer, LeaseState, as_of};
use crate::store::call_id;

/// Whose permit a revoke ends: `holder`'s (the one with `token`, when given), or every live
/// permit when neither is named.
#[derive(Clone, Copy)]
pub(super) struct Revoked<'a> {
    pub holder: Option<&'a str>,
    pub token: Option<u64>,
}

/// The permits of `state` (as of `now`) that `after` ended: what the answer and the audit entry
/// name. As the revoke decided, on the state as of now: a permit a lapse hands to a waiter
/// between its calls is the waiter's, and may be ended.
fn ended(state: &LeaseState, after: &LeaseState, now: Millis) -> Vec<Holder> {
    as_of(state, now)
        .live_permits(now)
        .into_iter()
        .filter(|p| after.was_revoked(&p.holder, p.token))
        .map(Holder::of)
        .collect()
}

struct RevokePlanner<'a> {
    target: &'a Target,
    resource: &'a str,
    reason: &'a str,
    revoked: Revoked<'a>,
    call: &'a Call<'a>,
    service: &'a LeaseService,
}

impl Planner for RevokePlanner<'_> {
    type Decision = SignedAnswer;

    fn plan(&mut self, given: Given<'_>) -> Result<Attempt<SignedAnswer>, LeaseError> {
        let state = &given.leases[0];
        let (signing, actor) = (&self.call.signing, self.call.actor);
        let now = signing.now;
        let key = &self.target.keys[0];
        let (answer, writes, audit, leaves) =
            match revoke(state, self.revoked.holder, self.revoked.token, now) {
                Revocation::End(write) => {
                    let after = write.effect.apply(state);
                    let ended = ended(state, &after, now);
                    let entry = AuditEntry {
                        id: call_id()?,
                        at: iso8601(now),
                        actor: actor.id.to_owned(),
                        resource: Some(self.resource.to_owned()),
                        session: None,
                        ended: ended.clone(),
                        reason: self.reason.to_owned(),
                        reopened: None,
                    };
                    let answer = LeaseAnswer::revoked(&after, ended, now);
                    (
                        answer,
                        vec![(key.clone(), write)],
                        vec![(actor.tenant.clone(), entry)],
                        vec![(key.clone(), after)],
                    )
                }
                Revocation::Deny(witnesses) => {
                    let op = self.call.request.op;
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
    pub(super) async fn revoke(
        &self,
        call: &Call<'_>,
        resource: &str,
        revoked: Revoked<'_>,
    ) -> Result<SignedAnswer, LeaseError> {
        let reason = call
            .request
            .reason
            .as_deref()
            .ok_or(LeaseError::Missing("reason"))?;
        let target = call.target([resource]);
        let _turn = self.waits.turn(&target.keys[0]).await;
        let mut planner = RevokePlanner {
            target: &target,
            resource,
            reason,
            revoked,
            call,
            service: self,
        };
        self.answered(call, &target, &mut planner).await
    }
}
