//! An acquire of candidates (docs/adr/0012): the first of 2..50 resources, in the order given,
//! that can be granted now. Every candidate is read in one snapshot (round trip 1); the first
//! one the rules grant is written, guarded on that candidate as read, with the request's record
//! in the same transaction when it has a requestId (round trip 2). A lost guard means another
//! writer changed that candidate since the read: the engine reads again, so a race costs a
//! round, never a wrong grant. The other candidates are not guarded: one freed after the read
//! was not grantable at the read, and guarding 50 items would make every claim conflict with
//! every release of any of them.

use super::answers::{MAX_KEPT_ANSWER_BYTES, Signing, record_put};
use super::mutation::Mutation;
use super::rounds::{Attempt, Given, Planner, Target};
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::clock::Millis;
use crate::lease::decide::{Acquired, Asked, handoffs_due};
use crate::lease::session::{Session, ended};
use crate::lease::{LeaseAnswer, LeaseState, Write};
use crate::store::Commit;
use crate::witness::Witness;

/// What one snapshot of the candidates decided: the pure part of the plan.
#[derive(Debug, PartialEq)]
pub(super) enum Picked {
    /// The first grantable candidate (its index), and its write.
    Granted(usize, Write),
    /// None is: each one's witnesses at `/candidates/<i>`, and the hand-offs the read noticed
    /// (written with the refusal, as a single resource's refusal writes them).
    Refused {
        witnesses: Vec<Witness>,
        writes: Vec<(usize, Write)>,
    },
}

/// Whether a candidate may be taken in the request's session, and in which until when
/// (`None`: no session asked); its witnesses if not.
pub(super) type Admitted<'s> = Result<Option<(&'s str, Millis)>, Vec<Witness>>;

/// The first of `candidates` (each with its stored state and, in a session, whether the
/// session takes it) that `asked` is granted on at `now`, in the order given.
pub(super) fn pick(
    asked: Asked<'_>,
    candidates: &[(&LeaseState, Admitted<'_>)],
    now: Millis,
) -> Picked {
    let mut witnesses = Vec::new();
    let mut writes = Vec::new();
    for (i, (state, bound)) in candidates.iter().enumerate() {
        let denied = match bound {
            Err(refused) => refused.clone(),
            Ok(bound) => match Mutation::Acquire(asked).decide(state, *bound, now) {
                Acquired::Write(write) => return Picked::Granted(i, write),
                // A candidate never waits: a place the caller has in its queue is not kept.
                Acquired::Deny(why) | Acquired::Queue { witnesses: why, .. } => why,
                Acquired::Refuse { witnesses: why, .. } => why,
            },
        };
        witnesses.extend(denied.into_iter().map(|mut w| {
            w.path = format!("/candidates/{i}");
            w
        }));
        writes.extend(handoffs_due(state, now).map(|write| (i, write)));
    }
    Picked::Refused { witnesses, writes }
}

struct CandidatesPlanner<'a> {
    target: &'a Target,
    candidates: &'a [String],
    asked: Asked<'a>,
    call: &'a Call<'a>,
    service: &'a LeaseService,
}

impl CandidatesPlanner<'_> {
    /// Whether the request's session takes a permit of `resource` now, and until when.
    fn bound<'s>(&self, session: Option<&'s Session>, resource: &str, now: Millis) -> Admitted<'s> {
        if self.target.session.is_none() {
            return Ok(None);
        }
        let session = session.ok_or_else(|| vec![ended()])?;
        session
            .admits(self.asked.holder, resource, now)
            .map(|()| Some((session.id.as_str(), session.expires_at)))
    }
}

impl Planner for CandidatesPlanner<'_> {
    type Decision = SignedAnswer;

    fn plan(&mut self, given: Given<'_>) -> Result<Attempt<SignedAnswer>, LeaseError> {
        let signing = self.call.signing;
        let now = signing.now;
        let op = self.call.request.op;
        let decided: Vec<_> = given
            .leases
            .iter()
            .zip(self.candidates)
            .map(|(state, resource)| (state, self.bound(given.session, resource, now)))
            .collect();
        let (answer, writes, scope) = match pick(self.asked, &decided, now) {
            Picked::Granted(i, write) => {
                let after = write.effect.apply(&given.leases[i]);
                let mut answer = LeaseAnswer::granted(op, &after, Some(self.asked.holder), now);
                answer.resource = Some(self.candidates[i].clone());
                let scope = format!("{}|{}", self.call.actor.tenant.as_str(), self.candidates[i]);
                (answer, vec![(i, write)], Some(scope))
            }
            Picked::Refused { witnesses, writes } => {
                let after: Vec<LeaseState> = given
                    .leases
                    .iter()
                    .enumerate()
                    .map(|(i, state)| match writes.iter().find(|(at, _)| *at == i) {
                        Some((_, write)) => write.effect.apply(state),
                        None => state.clone(),
                    })
                    .collect();
                let shown: Vec<(&str, &LeaseState)> = self
                    .candidates
                    .iter()
                    .map(String::as_str)
                    .zip(&after)
                    .collect();
                let holder = self.asked.holder;
                let answer = LeaseAnswer::for_set(op, false, &shown, holder, now, witnesses);
                (answer, writes, None)
            }
        };
        let signing = Signing {
            scope: scope.as_deref(),
            ..signing
        };
        let answer = self.service.sign(answer, &signing)?;
        let record = record_put(self.target, Some(&answer), &signing, true)?;
        // A refusal lists every candidate's permits, which can outgrow a record (see `set`).
        if let Some(put) = &record
            && put.record.answer.len() > MAX_KEPT_ANSWER_BYTES
        {
            return Err(LeaseError::TooLargeToKeep(put.record.answer.len()));
        }
        let leaves = writes
            .iter()
            .map(|(i, write)| {
                let key = self.target.keys[*i].clone();
                (key, write.effect.apply(&given.leases[*i]))
            })
            .collect();
        let writes: Vec<_> = writes
            .into_iter()
            .map(|(i, write)| (self.target.keys[i].clone(), write))
            .collect();
        let attempt = Attempt::together(writes, Vec::new(), record, leaves, answer);
        // One write and nothing else to commit: a lone conditional write (half a transaction's
        // price); nothing at all: nothing to commit.
        Ok(match attempt.commit {
            Some(Commit::Together {
                mut writes,
                record: None,
                ..
            }) if writes.len() <= 1 => Attempt {
                commit: writes.pop().map(|(key, write)| Commit::Lone { key, write }),
                ..attempt
            },
            _ => attempt,
        })
    }
}

impl LeaseService {
    /// `asked` on the first of `candidates` that can be granted now.
    pub(super) async fn candidates(
        &self,
        call: &Call<'_>,
        candidates: &[String],
        asked: Asked<'_>,
    ) -> Result<SignedAnswer, LeaseError> {
        let target = call.target(candidates.iter().map(String::as_str));
        let mut planner = CandidatesPlanner {
            target: &target,
            candidates,
            asked,
            call,
            service: self,
        };
        self.answered(call, &target, &mut planner).await
    }
}
