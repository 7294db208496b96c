//! One resource's acquire, renew or release, planned for the round engine: with a requestId its
//! answer commits with its record, guarded by the state it was decided on; without one it is a
//! lone guarded write, answered on the lease the write left.
//!
//! The first round needs no read when the outcome is known before anything is sent: without a
//! requestId, the write that succeeds in the common case (a free lease's take, the holder's
//! renew or release, a re-acquire the view guesses); with one, a write whose outcome its guard
//! pins, or an acquire's denial the view guesses, committed with a check that the lease is
//! still as seen. Either is only a guess: a stale view fails its guard, and the lease that comes
//! back is decided on.

use super::answers::{Signing, record_put, sign};
use super::rounds::{Attempt, Given, Planner, Target};
use super::views::Views;
use super::{LeaseError, SignedAnswer};
use crate::lease::decide::{
    Acquired, Asked, Guess, HolderOp, acquire, ended_handoff, guess_acquire, guess_unseen_acquire,
    hold, holder_write, with_holders_permits, withdraw,
};
use crate::lease::session::{Binding, Session, bind, ended};
use crate::lease::{Command, Guard, LeaseAnswer, LeaseState, Op, Write};
use crate::provenance::Issuer;
use crate::store::Commit;
use crate::witness::Witness;

/// The op: an acquire, or a renew or release by a permit's holder.
#[derive(Clone, Copy)]
pub(super) enum Mutation<'a> {
    Acquire(Asked<'a>),
    Hold(HolderOp<'a>),
}

impl<'a> Mutation<'a> {
    /// The mutation `command` is, if it is one.
    pub fn of(command: &'a Command) -> Option<Self> {
        Asked::of(command)
            .map(Mutation::Acquire)
            .or_else(|| HolderOp::of(command).map(Mutation::Hold))
    }

    /// What it decides on the stored `state`: a renew's or a release's decision as the one
    /// decision of a single resource's mutation (it never queues). `bound`: an acquire in the
    /// session of this id, which ends then (docs/adr/0010): granted until then, its permit in it.
    pub fn decide(
        &self,
        state: &LeaseState,
        bound: Option<(&str, crate::clock::Millis)>,
        now: crate::clock::Millis,
    ) -> Acquired {
        let (decided, binding) = match (self, bound) {
            (Mutation::Acquire(asked), Some((id, end))) => {
                let asked = Asked {
                    ttl_ms: end - now,
                    session: Some(id),
                    ..*asked
                };
                (acquire(state, &asked, now), Some(Binding::In(id)))
            }
            (Mutation::Acquire(asked), None) => (acquire(state, asked, now), Some(Binding::Own)),
            (Mutation::Hold(op @ HolderOp::Renew { .. }), _) => {
                (hold(state, *op, now).into(), Some(Binding::Kept))
            }
            (Mutation::Hold(op), _) => (hold(state, *op, now).into(), None),
        };
        let Acquired::Write(write) = decided else {
            return decided;
        };
        let write = match binding {
            Some(binding) => bind(state, write, self.holder(), binding),
            None => write,
        };
        // The permit's value (docs/adr/0011): an acquire's is the one it asks for; one that
        // asks none keeps the value of the permit it re-acquires (the same token: a renew, which
        // keeps it too; the attack of 2026-12-06 found it cleared) and a new permit has none. A
        // renew changes it only when it sends one.
        Acquired::Write(match self {
            Mutation::Acquire(asked) => {
                with_holders_permits(state, write, asked.holder, |had, permit| {
                    permit.value = match asked.value {
                        Some(value) => Some(value.to_owned()),
                        None => had.and_then(|had| had.value.clone()),
                    }
                })
            }
            Mutation::Hold(HolderOp::Renew {
                holder,
                value: Some(value),
                ..
            }) => with_holders_permits(state, write, holder, |_, permit| {
                permit.value = Some((*value).to_owned())
            }),
            Mutation::Hold(HolderOp::Renew { value: None, .. } | HolderOp::Release { .. }) => write,
        })
    }

    /// Whose permit it asks for or works on.
    fn holder(&self) -> &str {
        match self {
            Mutation::Acquire(asked) => asked.holder,
            Mutation::Hold(HolderOp::Renew { holder, .. } | HolderOp::Release { holder, .. }) => {
                holder
            }
        }
    }

    /// Whether it sets a permit's value, or may clear one the view shows (an acquire asks for
    /// its own, none included): decided on a read, never guessed (a lease's guessed take or
    /// extend cannot carry one).
    fn sets_value(&self, view: &LeaseState) -> bool {
        match self {
            Mutation::Acquire(asked) => {
                asked.value.is_some() || view.permits.iter().any(|p| p.value.is_some())
            }
            Mutation::Hold(HolderOp::Renew { value, .. }) => value.is_some(),
            Mutation::Hold(HolderOp::Release { .. }) => false,
        }
    }

    /// The write to try with no read and no record (see the module's comment).
    fn guess_alone(&self, view: &LeaseState, now: crate::clock::Millis) -> Option<Write> {
        if self.sets_value(view) {
            return None;
        }
        match self {
            Mutation::Acquire(asked) => match guess_acquire(view, asked, now) {
                // A re-acquire by the holder the view shows: its own write.
                Some(Guess::Write(write)) if write.effect.keeps_token() => Some(write),
                _ => guess_unseen_acquire(asked, now),
            },
            Mutation::Hold(op) => holder_write(*op, now),
        }
    }

    /// What is known on `view` before anything is sent, for a call with a record.
    fn guess_recorded(&self, view: &LeaseState, now: crate::clock::Millis) -> Option<Guess> {
        if self.sets_value(view) {
            return None;
        }
        match self {
            Mutation::Acquire(asked) => guess_acquire(view, asked, now),
            Mutation::Hold(op) => holder_write(*op, now).map(Guess::Write),
        }
    }
}

/// How a mutation answers once its plan commits.
pub(super) struct Reply {
    answer: Answer,
    /// The lease the answer shows, unless a lone write's commit tells the one it left.
    shown: LeaseState,
    /// Whether the caller waits on, if its answer shows it a place.
    waits: bool,
}

enum Answer {
    /// Signed before the commit, which keeps it in the record.
    Signed(Box<SignedAnswer>),
    Granted,
    Denied(Vec<Witness>),
}

/// A mutation's rounds: its planner.
pub(super) struct MutationPlanner<'a> {
    /// One lease, and the request's record.
    pub target: &'a Target,
    pub mutation: Mutation<'a>,
    pub op: Op,
    pub caller: Option<&'a str>,
    pub signing: Signing<'a>,
    pub issuer: &'a Issuer,
    /// Whether to try an unseen guess first, without a record (a waiter's later rounds know the
    /// resource is held, and read instead: a read unit, where the failing write costs a write
    /// unit).
    pub guess_first: bool,
}

impl MutationPlanner<'_> {
    /// The answer, and the lease the caller waits on when it waits in the queue: on `left`, the
    /// lease the commit left when the store told it.
    pub fn answer(
        &self,
        reply: Reply,
        left: Option<LeaseState>,
    ) -> Result<(SignedAnswer, Option<LeaseState>), LeaseError> {
        let state = left.unwrap_or(reply.shown);
        let now = self.signing.now;
        let answer = match reply.answer {
            Answer::Signed(answer) => *answer,
            Answer::Granted => sign(
                self.issuer,
                LeaseAnswer::granted(self.op, &state, self.caller, now),
                &self.signing,
            )?,
            Answer::Denied(witnesses) => sign(
                self.issuer,
                LeaseAnswer::denied(self.op, &state, self.caller, now, witnesses),
                &self.signing,
            )?,
        };
        let waits = reply.waits && self.has_place(&state);
        Ok((answer, waits.then_some(state)))
    }

    /// Whether a round of this waiting acquire on `view` would leave it as it is: its place
    /// still in the queue, nothing to write, nothing handed to it. In a process that is the only
    /// writer of its store such a round need not run: its read would show what the view, which
    /// the last write left, does (a session-bound call is always read: its session may end).
    pub fn only_waits_on(&self, view: &LeaseState) -> bool {
        let Mutation::Acquire(asked) = &self.mutation else {
            return false;
        };
        self.target.session.is_none()
            && self.has_place(view)
            && ended_handoff(view, asked, self.signing.now).is_none()
            && matches!(
                self.decided(view, None),
                Acquired::Queue { write: None, .. }
            )
    }

    /// Whether this waiting acquire, on `view`, would be granted: a permit handed to its place,
    /// or one free for it. Such a round may start from the view (see `Engine::run_on`): its
    /// write is guarded by the state it was planned on.
    pub fn takes_on(&self, view: &LeaseState) -> bool {
        let Mutation::Acquire(asked) = &self.mutation else {
            return false;
        };
        self.target.session.is_none()
            && ended_handoff(view, asked, self.signing.now).is_none()
            && matches!(self.decided(view, None), Acquired::Write(_))
    }

    fn has_place(&self, state: &LeaseState) -> bool {
        self.caller
            .is_some_and(|h| state.queue_position(h, self.signing.now).is_some())
    }

    fn lone(
        &self,
        write: Write,
        state: &LeaseState,
        answer: Answer,
        waits: bool,
    ) -> Attempt<Reply> {
        let after = write.effect.apply(state);
        Attempt {
            leaves: vec![(self.target.keys[0].clone(), after.clone())],
            commit: Some(Commit::Lone {
                key: self.target.keys[0].clone(),
                write,
            }),
            decision: Reply {
                answer,
                shown: after,
                waits,
            },
            guessed: false,
        }
    }

    /// The answer and its record, committed together with its write and check, if any.
    fn with_record(
        &self,
        this: Recorded,
        signing: Signing<'_>,
        guessed: bool,
    ) -> Result<Attempt<Reply>, LeaseError> {
        let signed = sign(self.issuer, this.answer, &signing)?;
        let kept = (!this.place).then_some(&signed);
        let record = record_put(self.target, kept, &signing, !guessed)?;
        let key = &self.target.keys[0];
        Ok(Attempt {
            leaves: this
                .write
                .as_ref()
                .map(|_| (key.clone(), this.shown.clone()))
                .into_iter()
                .collect(),
            commit: Some(Commit::Together {
                writes: this.write.map(|w| (key.clone(), w)).into_iter().collect(),
                unchanged: this.unchanged.map(|guard| (key.clone(), guard)),
                audit: Vec::new(),
                sessions: Vec::new(),
                record,
            }),
            decision: Reply {
                answer: Answer::Signed(Box::new(signed)),
                shown: this.shown,
                waits: this.place,
            },
            guessed,
        })
    }
}

/// What a call with a record commits beside its record.
struct Recorded {
    write: Option<Write>,
    /// The check that the lease is as the answer was decided on, for a denial with no read.
    unchanged: Option<Guard>,
    /// The lease the answer shows: the one the write leaves.
    shown: LeaseState,
    answer: LeaseAnswer,
    /// A waiting call's place: its record keeps no answer, and a retry resumes it.
    place: bool,
}

impl MutationPlanner<'_> {
    /// What it decides on `state`, with the request's session as read (docs/adr/0010): an
    /// acquire in a session the session does not admit is refused, with nothing to write.
    fn decided(&self, state: &LeaseState, session: Option<&Session>) -> Acquired {
        let now = self.signing.now;
        let bound = match (&self.target.session, &self.mutation) {
            (Some(key), Mutation::Acquire(asked)) => {
                let resource = self.target.keys[0].resource();
                let admitted = match session {
                    Some(s) => s.admits(asked.holder, resource, now).map(|()| s.expires_at),
                    None => Err(vec![ended()]),
                };
                match admitted {
                    Ok(end) => Some((key.id(), end)),
                    // Refused: its waiting ends too, and a permit handed to it goes on.
                    Err(witnesses) => {
                        return match withdraw(state, asked.holder, now) {
                            Some(write) => Acquired::Refuse { write, witnesses },
                            None => Acquired::Deny(witnesses),
                        };
                    }
                }
            }
            _ => None,
        };
        self.mutation.decide(state, bound, now)
    }
}

impl Planner for MutationPlanner<'_> {
    type Decision = Reply;

    fn guess(&mut self, views: &Views) -> Result<Option<Attempt<Reply>>, LeaseError> {
        let now = self.signing.now;
        if views.reads_first(&self.target.keys[0]) {
            return Ok(None);
        }
        let seen = views.get(&self.target.keys[0]);
        // Without a requestId: a lone write, answered on the lease it leaves.
        if self.target.record.is_none() {
            let view = seen.unwrap_or_default();
            let write = self
                .mutation
                .guess_alone(&view, now)
                .filter(|_| self.guess_first);
            return Ok(write.map(|write| Attempt {
                guessed: true,
                ..self.lone(write, &view, Answer::Granted, false)
            }));
        }
        // Only on a view of the lease can a denial be guessed: the empty one stands for a
        // lease never seen.
        let known = seen.is_some();
        let view = seen.unwrap_or_default();
        match self.mutation.guess_recorded(&view, now) {
            Some(Guess::Denial {
                unchanged,
                witnesses,
            }) if known => {
                let this = Recorded {
                    write: None,
                    unchanged: Some(unchanged),
                    answer: LeaseAnswer::denied(self.op, &view, self.caller, now, witnesses),
                    shown: view,
                    place: false,
                };
                self.with_record(this, self.signing, true).map(Some)
            }
            // A write whose outcome its guard pins: the answer is known before it commits.
            Some(Guess::Write(write)) => match write.outcome() {
                Some(after) => {
                    let this = Recorded {
                        write: Some(write),
                        unchanged: None,
                        answer: LeaseAnswer::granted(self.op, &after, self.caller, now),
                        shown: after,
                        place: false,
                    };
                    self.with_record(this, self.signing, true).map(Some)
                }
                None => Ok(None),
            },
            Some(Guess::Denial { .. }) | None => Ok(None),
        }
    }

    fn plan(&mut self, given: Given<'_>) -> Result<Attempt<Reply>, LeaseError> {
        let state = &given.leases[0];
        let now = self.signing.now;
        if self.target.record.is_none() {
            return Ok(match self.decided(state, given.session) {
                Acquired::Write(write) => self.lone(write, state, Answer::Granted, false),
                Acquired::Queue {
                    write: Some(write),
                    witnesses,
                } => self.lone(write, state, Answer::Denied(witnesses), true),
                Acquired::Refuse { write, witnesses } => {
                    self.lone(write, state, Answer::Denied(witnesses), false)
                }
                Acquired::Queue {
                    write: None,
                    witnesses,
                } => answer_now(state, Answer::Denied(witnesses), true),
                Acquired::Deny(witnesses) => answer_now(state, Answer::Denied(witnesses), false),
            });
        }
        // The retry of a waiting call that was handed a grant since: that grant, replayed as of
        // when it was handed, and kept for the call's later retries.
        if let Mutation::Acquire(asked) = &self.mutation
            && let Some(handed) = ended_handoff(state, asked, now)
        {
            let this = Recorded {
                write: None,
                unchanged: None,
                answer: LeaseAnswer::ended_handoff(self.op, &handed),
                shown: state.clone(),
                place: false,
            };
            return self.with_record(this, self.signing.at(handed.handoff.at), false);
        }
        let (write, waits, witnesses) = match self.decided(state, given.session) {
            Acquired::Write(write) => (Some(write), false, None),
            Acquired::Deny(witnesses) => (None, false, Some(witnesses)),
            Acquired::Queue { write, witnesses } => (write, true, Some(witnesses)),
            Acquired::Refuse { write, witnesses } => (Some(write), false, Some(witnesses)),
        };
        let shown = write
            .as_ref()
            .map_or_else(|| state.clone(), |w| w.effect.apply(state));
        let place = waits && self.has_place(&shown);
        let answer = match witnesses {
            None => LeaseAnswer::granted(self.op, &shown, self.caller, now),
            Some(witnesses) => LeaseAnswer::denied(self.op, &shown, self.caller, now, witnesses),
        };
        // The place is committed with a record of the request (no answer in it), so that the
        // requestId is this input's from now on: another input under it is a conflict, and a
        // retry resumes the place. The grant replaces it. A place already recorded, with nothing
        // to write, is answered at once.
        if place && write.is_none() && given.place_recorded {
            let answer = sign(self.issuer, answer, &self.signing)?;
            return Ok(answer_now(&shown, Answer::Signed(Box::new(answer)), true));
        }
        let this = Recorded {
            write,
            unchanged: None,
            shown,
            answer,
            place,
        };
        self.with_record(this, self.signing, false)
    }
}

/// A plan with nothing to commit: the answer now, on `state`.
fn answer_now(state: &LeaseState, answer: Answer, waits: bool) -> Attempt<Reply> {
    Attempt {
        commit: None,
        leaves: Vec::new(),
        decision: Reply {
            answer,
            shown: state.clone(),
            waits,
        },
        guessed: false,
    }
}
