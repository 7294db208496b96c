//! An acquire of one resource, and its wait (docs/adr/0007): each round of a wait is one run of
//! the round engine at its own time, then a sleep until the resource changes, a permit or place
//! ahead lapses, the wait ends, or the caller hangs up.

use super::mutation::{Mutation, MutationPlanner};
use super::rounds::Ended;
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::clock::Millis;
use crate::lease::decide::Asked;
use crate::service::waiting::{Woke, hung_up, next_change};

impl LeaseService {
    /// `asked` (its `wait_ms` the whole wait) on `resource`.
    pub(super) async fn acquire(
        &self,
        call: &Call<'_>,
        resource: &str,
        asked: Asked<'_>,
    ) -> Result<SignedAnswer, LeaseError> {
        // A wait holds its caller's connection for up to its whole length: one payer's waits
        // may take only their share of this server's (refused before anything is done).
        let _share = match (&self.wait_shares, asked.wait_ms > 0) {
            (Some(shares), true) => Some(
                shares
                    .take(call.actor.tenant)
                    .map_err(|taken| LeaseError::TooManyWaits(taken.0))?,
            ),
            _ => None,
        };
        let target = call.target([resource]);
        let key = &target.keys[0];
        let now = call.signing.now;
        let started = tokio::time::Instant::now();
        let deadline = now + asked.wait_ms;
        let mut round = 0;
        // A caller who hangs up ends its wait: it takes no permit it can no longer learn of
        // (it used to, for the whole ttl it asked, while the waiters behind it waited: the
        // attack of 2026-12-03, round 4). Its place lasts as any wait's, 30 s past the wait's
        // end; a permit freed meanwhile is kept for it until then, then goes on.
        let mut hung_up = hung_up();
        // A plain acquire of a single-permit lease races its rivals guarded, as writers in
        // other processes do, and takes no turn: its write only takes a permit, or writes a
        // hand-off that a lapse made, which the waiter's own timer is due at anyway, so no
        // waiter misses a wake-up it needs. On one contended lease the turns had made every
        // refusal wait for the one before it to reach the store (half the contended
        // throughput: BENCHMARKS.md, issue #28). A semaphore's acquire, a version-guarded
        // write, still takes turns: its rivals would lose the version race and back off.
        let races = asked.limit == 1 && asked.wait_ms == 0;
        // The call as planned at `at`. Past the deadline (a late last round) the wait left is
        // negative: the place is kept from the wait's end, as any place is, not lengthened by
        // the lateness.
        let planner_at = |at: Millis, guess_first: bool| MutationPlanner {
            target: &target,
            mutation: Mutation::Acquire(Asked {
                wait_ms: deadline - at,
                ..asked
            }),
            op: call.request.op,
            caller: call.caller(),
            signing: call.signing.at(at),
            issuer: &self.issuer,
            guess_first,
        };
        loop {
            let turn = match races {
                true => None,
                false => Some(self.waits.turn(key).await),
            };
            // Decided at the time it runs, its turn taken: never earlier than a read this
            // process answered before it, which showed the resource as of its own time. (The
            // last round of a wait used to decide at the wait's deadline, however late it ran:
            // a get in between could show a hand-off the round then undid, and two signed
            // answers named one token with two holders: the attack of 2026-12-05.)
            let round_now = round_time(now, started.elapsed());
            // After the first round the caller knows the resource is held or queued: it reads
            // (one read unit) instead of the unseen take, a write that would fail (one write
            // unit).
            let mut planned = planner_at(round_now, round == 0);
            round += 1;
            let (answer, waits_on) = match self.engine(round_now).run(&target, &mut planned).await?
            {
                Ended::Done { decision, left } => planned.answer(decision, left)?,
                Ended::Replay(record) => (self.replayed(&record, &target.fingerprint)?, None),
            };
            // Armed before the turn is given up, so every later write of the resource in this
            // process wakes it, and its own write does not.
            let woken = self.waits.subscribe(key);
            drop(turn);
            // Waiting on, as the decision says: a refusal answers the caller's place too, and
            // is no wait (found by the attack of 2026-12-03, round 3: a LIMIT_MISMATCH waited
            // out the whole wait, and then answered its own record's replay).
            let Some(mut state) = waits_on.filter(|_| round_now < deadline) else {
                return Ok(answer);
            };
            let (mut woken, mut seen_at) = (woken, round_now);
            loop {
                let next = next_change(&state, seen_at, deadline);
                let woke = tokio::select! {
                    woke = woken.until(next - seen_at) => woke,
                    () = &mut hung_up => return Ok(answer),
                };
                if woke == Woke::ByTime || !self.waits.sole_writer() {
                    break;
                }
                // Woken by a write here: most writes of a queued resource leave every waiter
                // but one where it was (a release hands the permit to the first in line), and
                // a round each, a read and a signed answer, made every hand-off cost as many
                // rounds as there were waiters (16 waiters: 24 store calls a grant, and a core
                // for 120 grants a second, where etcd's lock took a fifth of one). So first a
                // look at the state that write left: a round runs only if it would do more
                // than wait on. Armed before the look, so that a write the view does not show
                // yet wakes it again.
                woken = self.waits.subscribe(key);
                let at = round_time(now, started.elapsed());
                match self.views.get(key) {
                    Some(view) if at < deadline && planner_at(at, false).only_waits_on(&view) => {
                        state = view;
                        seen_at = at;
                    }
                    _ => break,
                }
            }
        }
    }
}

/// The time of a round that runs `elapsed` after its call started at `now`.
fn round_time(now: Millis, elapsed: std::time::Duration) -> Millis {
    now + Millis::try_from(elapsed.as_millis()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_that_runs_past_the_waits_deadline_decides_at_the_time_it_runs() {
        // The call started at 1_000 and waits 2 s; its last round runs 2.5 s in (late: a turn
        // behind a slow write). It decides at 3_500, not at the deadline, 3_000, which a read
        // answered in between (at 3_200, say) would be later than.
        let round = round_time(1_000, std::time::Duration::from_millis(2_500));
        assert_eq!(round, 3_500);
    }
}
