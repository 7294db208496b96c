//! A renew or a release of one resource's permit, by its holder: one run of the round engine,
//! in the resource's turn (its write may hand a freed permit on, which this process's waiters
//! are woken for).

use super::mutation::{Mutation, MutationPlanner};
use super::rounds::Ended;
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::lease::decide::HolderOp;
use crate::store::LeaseKey;

impl LeaseService {
    /// `op` on `resource`.
    pub(super) async fn hold(
        &self,
        call: &Call<'_>,
        resource: &str,
        op: HolderOp<'_>,
    ) -> Result<SignedAnswer, LeaseError> {
        let key = LeaseKey::new(call.actor.tenant, resource);
        let _turn = self.waits.turn(&key).await;
        let mut planned = MutationPlanner {
            key: [key],
            record: call.record(),
            fingerprint: call.request.fingerprint(),
            mutation: Mutation::Hold(op),
            op: call.request.op,
            caller: call.caller(),
            signing: call.signing,
            issuer: &self.issuer,
            guess_first: true,
        };
        match self.engine(call.signing.now).run(&mut planned).await? {
            Ended::Done { decision, left } => Ok(planned.answer(decision, left)?.0),
            Ended::Replay(record) => self.replayed(&record, &planned.fingerprint),
        }
    }
}
