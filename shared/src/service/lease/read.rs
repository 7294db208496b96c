//! A get or a check of one resource: one strongly consistent read, nothing written, no rounds.
//! What it shows is the resource as the next write will find it ([`as_of`]).

use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::lease::{LeaseAnswer, LeaseState, as_of};
use crate::store::LeaseKey;

/// What a read asks of the resource.
#[derive(Clone, Copy)]
pub(super) enum Asked<'a> {
    /// The resource, the caller's permit first.
    Get,
    /// Whether `token` (of `holder`, when given) is a live permit.
    Check { token: u64, holder: Option<&'a str> },
}

impl LeaseService {
    pub(super) async fn read(
        &self,
        call: &Call<'_>,
        resource: &str,
        asked: Asked<'_>,
    ) -> Result<SignedAnswer, LeaseError> {
        let key = LeaseKey::new(call.actor.tenant, resource);
        let state = self.store.read_one(&key, call.signing.now).await?;
        self.views.put(&key, &state);
        let answer = answer(&state, asked, call.caller(), call.signing.now);
        self.sign(answer, &call.signing)
    }
}

/// The answer to `asked` on the stored `state` at `now`.
fn answer(
    state: &LeaseState,
    asked: Asked<'_>,
    caller: Option<&str>,
    now: crate::clock::Millis,
) -> LeaseAnswer {
    let state = &as_of(state, now);
    match asked {
        Asked::Check { token, holder } => LeaseAnswer::checked(state, token, holder, now),
        Asked::Get => LeaseAnswer::observed(state, caller, now),
    }
}
