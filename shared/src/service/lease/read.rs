//! A get, check or watch of one resource: strongly consistent reads, nothing written, no rounds.
//! What it shows is the resource as the next write will find it ([`as_of`]). A watch reads
//! again each time the resource may have changed: a write of it in this process, the lapse of a
//! live permit or place (its own timer), or (on Lambda) every poll, until its state is not the
//! one its tag names, or its wait ends (docs/adr/0011).

use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::clock::Millis;
use crate::lease::{LeaseAnswer, LeaseState, Op, as_of};
use crate::service::waiting::{hung_up, next_change};
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

    /// A watch: read, and read again when the resource may have changed, until its tag is not
    /// `tag` (at once without one) or `wait_ms` has passed. A caller who hangs up ends it.
    pub(super) async fn watch(
        &self,
        call: &Call<'_>,
        resource: &str,
        tag: Option<&str>,
        wait_ms: Millis,
    ) -> Result<SignedAnswer, LeaseError> {
        let key = &LeaseKey::new(call.actor.tenant, resource);
        // It holds its caller's connection for up to its wait: one payer's waits may take only
        // their share of this server's, as waiting acquires do.
        let _share = match (&self.watch_shares, wait_ms > 0 && tag.is_some()) {
            (Some(shares), true) => Some(
                shares
                    .take(call.actor.tenant)
                    .map_err(|taken| LeaseError::TooManyWaits(taken.0))?,
            ),
            _ => None,
        };
        let started = tokio::time::Instant::now();
        let deadline = call.signing.now + wait_ms;
        let mut hung_up = hung_up();
        loop {
            // Armed before the read: a write that commits after it wakes the watch.
            let mut woken = self.waits.subscribe(key);
            let now =
                call.signing.now + Millis::try_from(started.elapsed().as_millis()).unwrap_or(0);
            let state = self.store.read_one(key, now).await?;
            self.views.put(key, &state);
            let current = as_of(&state, now);
            let seen = current.tag(now);
            let seen = match call.signing.scope {
                Some(scope) => super::answers::state_tag(&self.issuer, scope, &seen),
                None => seen,
            };
            let changed = tag != Some(seen.as_str());
            let answer = LeaseAnswer {
                op: Op::Watch,
                changed: Some(changed),
                ..LeaseAnswer::observed(&current, call.caller(), now)
            };
            if changed || now >= deadline {
                return self.sign(answer, &call.signing.at(now));
            }
            let next = next_change(&current, now, deadline);
            tokio::select! {
                _ = woken.until(next - now) => {}
                // Nobody hears this answer: it is only what the watch had seen.
                () = &mut hung_up => return self.sign(answer, &call.signing.at(now)),
            }
        }
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
