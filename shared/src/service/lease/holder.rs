//! A renew or a release of one resource's permit, by its holder: one run of the round engine,
//! in the resource's turn (its write may hand a freed permit on, which this process's waiters
//! are woken for).

use super::mutation::{Mutation, MutationPlanner};
use super::rounds::Ended;
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::lease::decide::HolderOp;

impl LeaseService {
    /// `op` on `resource`.
    pub(super) async fn hold(
        &self,
        call: &Call<'_>,
        resource: &str,
        op: HolderOp<'_>,
    ) -> Result<SignedAnswer, LeaseError> {
        let target = call.target([resource]);
        let _turn = self.waits.turn(&target.keys[0]).await;
        let mut planned = MutationPlanner {
            target: &target,
            mutation: Mutation::Hold(op),
            op: call.request.op,
            caller: call.caller(),
            signing: call.signing,
            issuer: &self.issuer,
            guess_first: true,
        };
        match self
            .engine(call.signing.now)
            .run(&target, &mut planned)
            .await?
        {
            Ended::Done { decision, left } => Ok(planned.answer(decision, left)?.0),
            Ended::Replay(record) => self.replayed(&record, &target.fingerprint),
        }
    }
}
