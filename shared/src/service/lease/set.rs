//! A set (docs/adr/0006): every member read in one snapshot, decided, and either every write
//! committed in one transaction or the set refused whole, from that snapshot. No moment exists at
//! which part of a set is held because of the request. A set never waits, and no member is ever
//! handed a grant: its members decide as a call with no ticket does.

use super::answers::{MAX_KEPT_ANSWER_BYTES, record_put};
use super::mutation::Mutation;
use super::rounds::{Attempt, Given, Planner, Target};
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::clock::Millis;
use crate::lease::decide::{Acquired, HolderOp, handoffs_due};
use crate::lease::session::ended;
use crate::lease::{LeaseAnswer, LeaseState, Write};
use crate::store::LeaseKey;
use crate::witness::Witness;

/// What a set decided on one snapshot: the pure fold of its members' decisions.
#[derive(Debug, PartialEq)]
pub(super) struct Folded {
    /// Every member granted: the set is.
    pub granted: bool,
    /// The writes to commit, by member: every member's when granted; when refused, only the
    /// hand-offs its read noticed, so that the permits its witnesses cite are the store's (as a
    /// single resource's refusal writes them).
    pub writes: Vec<(usize, Write)>,
    /// Why it was refused, or (granted) which released members an operator had revoked
    /// already: each member's witnesses, pointed at the member (`/<field>/<index>`).
    pub witnesses: Vec<Witness>,
    /// Each member as the writes leave it.
    pub after: Vec<LeaseState>,
    /// The members a granted release did not end, because an operator had (reported, not
    /// granted).
    pub ended_already: Vec<usize>,
}

/// Whether `mutation` releases a permit an operator revoked: ended already, so a set's release
/// reports it (`REVOKED`) and releases the other members still, instead of leaving them held for
/// their whole ttl (the attack of 2026-12-05). A set's renew still fails whole: the holder must
/// acquire the revoked member again.
fn releases_a_revoked_permit(mutation: &Mutation<'_>, state: &LeaseState) -> bool {
    matches!(mutation, Mutation::Hold(HolderOp::Release { holder, token, .. }) if state.was_revoked(holder, *token))
}

/// The set `members` (each with its resource's stored state) at `now`: all or nothing, but for
/// a release's member that was revoked (see [`releases_a_revoked_permit`]). `field` names the
/// request's field the members came in, for the witnesses' paths.
/// `bound`: an acquire in the session of this id, which ends then (docs/adr/0010).
pub(super) fn fold(
    members: &[(Mutation<'_>, &LeaseState)],
    field: &str,
    bound: Option<(&str, Millis)>,
    now: Millis,
) -> Folded {
    let mut writes = Vec::new();
    let mut blocking = Vec::new();
    // Members ended already: reported, with the hand-off their read noticed.
    let mut reported = Vec::new();
    let mut ended_writes = Vec::new();
    let mut ended_already = Vec::new();
    // Each witness pointed at its member, kept with the member's index to list them in order.
    let at = |i: usize, witnesses: Vec<Witness>| {
        witnesses.into_iter().map(move |mut w| {
            w.path = format!("/{field}/{i}");
            (i, w)
        })
    };
    // A member whose holder has a place in the resource's queue is refused like any other (its
    // place left as it is): a set does not wait.
    for (i, (mutation, state)) in members.iter().enumerate() {
        let (denied, handoffs) = match mutation.decide(state, bound, now) {
            Acquired::Write(write) => {
                writes.push((i, write));
                continue;
            }
            Acquired::Deny(witnesses) | Acquired::Queue { witnesses, .. } => (witnesses, None),
            Acquired::Refuse { write, witnesses } => (witnesses, Some(write)),
        };
        if releases_a_revoked_permit(mutation, state) {
            ended_already.push(i);
            reported.extend(at(i, denied));
            ended_writes.extend(handoffs.map(|write| (i, write)));
        } else {
            blocking.extend(at(i, denied));
        }
    }
    let granted = blocking.is_empty();
    if granted {
        writes.extend(ended_writes);
        writes.sort_by_key(|(i, _)| *i);
    } else {
        writes = members
            .iter()
            .enumerate()
            .filter_map(|(i, (_, state))| Some((i, handoffs_due(state, now)?)))
            .collect();
    }
    let mut witnesses = blocking;
    witnesses.extend(reported);
    witnesses.sort_by_key(|(i, _)| *i);
    let witnesses = witnesses.into_iter().map(|(_, w)| w).collect();
    let after = members
        .iter()
        .enumerate()
        .map(
            |(i, (_, state))| match writes.iter().find(|(at, _)| *at == i) {
                Some((_, write)) => write.effect.apply(state),
                None => (*state).clone(),
            },
        )
        .collect();
    Folded {
        granted,
        writes,
        witnesses,
        after,
        ended_already: if granted { ended_already } else { Vec::new() },
    }
}

/// A set's rounds: its planner. It reads before it writes (a snapshot of every member).
struct SetPlanner<'a> {
    target: &'a Target,
    resources: Vec<String>,
    mutations: Vec<Mutation<'a>>,
    field: &'static str,
    holder: &'a str,
    call: &'a Call<'a>,
    service: &'a LeaseService,
}

impl SetPlanner<'_> {
    /// The set refused whole for `witnesses`, its members as read: its answer, and its record.
    fn refused(
        &self,
        leases: &[LeaseState],
        witnesses: Vec<Witness>,
    ) -> Result<Attempt<SignedAnswer>, LeaseError> {
        let signing = &self.call.signing;
        let shown: Vec<(&str, &LeaseState)> = self
            .resources
            .iter()
            .map(String::as_str)
            .zip(leases)
            .collect();
        let op = self.call.request.op;
        let answer = LeaseAnswer::for_set(op, false, &shown, self.holder, signing.now, witnesses);
        let answer = self.service.sign(answer, signing)?;
        let record = record_put(self.target, Some(&answer), signing, true)?;
        Ok(Attempt::together(
            Vec::new(),
            Vec::new(),
            record,
            Vec::new(),
            answer,
        ))
    }
}

impl Planner for SetPlanner<'_> {
    type Decision = SignedAnswer;

    fn plan(&mut self, given: Given<'_>) -> Result<Attempt<SignedAnswer>, LeaseError> {
        let signing = &self.call.signing;
        let now = signing.now;
        let members: Vec<_> = self.mutations.iter().copied().zip(given.leases).collect();
        // An acquire in a session: the session must take every member (docs/adr/0010); if it
        // does not, the set is refused whole, nothing written.
        let bound = match &self.target.session {
            Some(key) => {
                let resources: Vec<&str> = self.resources.iter().map(String::as_str).collect();
                let admitted = match given.session {
                    Some(s) => s
                        .admits_all(self.holder, &resources, now)
                        .map(|()| s.expires_at),
                    None => Err(vec![ended()]),
                };
                match admitted {
                    Ok(end) => Some((key.id(), end)),
                    Err(witnesses) => return self.refused(given.leases, witnesses),
                }
            }
            None => None,
        };
        let folded = fold(&members, self.field, bound, now);
        let shown: Vec<(&str, &LeaseState)> = self
            .resources
            .iter()
            .map(String::as_str)
            .zip(&folded.after)
            .collect();
        let op = self.call.request.op;
        let mut answer = LeaseAnswer::for_set(
            op,
            folded.granted,
            &shown,
            self.holder,
            now,
            folded.witnesses,
        );
        // A member an operator revoked was not released by this call: not shown as granted.
        if let Some(leases) = answer.leases.as_mut() {
            for i in &folded.ended_already {
                leases[*i].granted = false;
            }
        }
        let answer = self.service.sign(answer, signing)?;
        let record = record_put(self.target, Some(&answer), signing, true)?;
        // A DynamoDB item holds at most 400 KB. A set's answer lists every member's permits and
        // can outgrow that (50 wide semaphores with long holder names); such a write could never
        // commit with its record, and a 502 would send the caller round for ever (found by the
        // attack of 2026-12-02). Refused before anything is written.
        if let Some(put) = &record
            && put.record.answer.len() > MAX_KEPT_ANSWER_BYTES
        {
            return Err(LeaseError::TooLargeToKeep(put.record.answer.len()));
        }
        let leaves = folded
            .writes
            .iter()
            .map(|(i, _)| (self.target.keys[*i].clone(), folded.after[*i].clone()))
            .collect();
        let writes = folded
            .writes
            .into_iter()
            .map(|(i, write)| (self.target.keys[i].clone(), write))
            .collect();
        Ok(Attempt::together(
            writes,
            Vec::new(),
            record,
            leaves,
            answer,
        ))
    }
}

impl LeaseService {
    pub(super) async fn set(&self, call: &Call<'_>) -> Result<SignedAnswer, LeaseError> {
        let request = call.request;
        let members = request.members()?;
        let holder = call.caller().ok_or(LeaseError::Missing("holder"))?;
        let mut mutations = Vec::with_capacity(members.len());
        for (_, command) in &members {
            // The request's shape check refuses a set of any other op first.
            mutations.push(Mutation::of(command).ok_or(LeaseError::Missing("resource"))?);
        }
        let target = call.target(members.iter().map(|(resource, _)| resource.as_str()));
        // Each resource's turn, in key order (so that two sets cannot wait on each other), held
        // for the whole set: its writes wake waiters as a single resource's do.
        let mut ordered: Vec<&LeaseKey> = target.keys.iter().collect();
        ordered.sort();
        let mut turns = Vec::with_capacity(ordered.len());
        for key in ordered {
            turns.push(self.waits.turn(key).await);
        }
        let mut planner = SetPlanner {
            target: &target,
            resources: members.iter().map(|(r, _)| r.clone()).collect(),
            mutations,
            // Where a blocking member's witnesses point: the field that named it.
            field: if request.leases.is_some() {
                "leases"
            } else {
                "resources"
            },
            holder,
            call,
            service: self,
        };
        self.answered(call, &target, &mut planner).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::decide::{Asked, HolderOp, acquire};
    use crate::lease::{Effect, Guard};

    const NOW: Millis = 1_000_000;

    fn take(holder: &str) -> Mutation<'_> {
        Mutation::Acquire(Asked {
            holder,
            ttl_ms: 10_000,
            limit: 1,
            wait_ms: 0,
            ticket: None,
            session: None,
            value: None,
        })
    }

    fn held(holder: &str, token: u64) -> LeaseState {
        LeaseState::granted(token, holder, NOW + 5_000)
    }

    #[test]
    fn every_member_free_grants_every_write() {
        let (a, b) = (LeaseState::vacant(3), LeaseState::default());
        let folded = fold(
            &[(take("me"), &a), (take("me"), &b)],
            "resources",
            None,
            NOW,
        );
        assert!(folded.granted);
        assert!(folded.witnesses.is_empty());
        assert_eq!(folded.writes.len(), 2);
        assert_eq!(folded.after[0].live(NOW).map(|p| p.token), Some(4));
        assert_eq!(folded.after[1].live(NOW).map(|p| p.token), Some(1));
        assert!(matches!(
            folded.writes[0].1.guard,
            Guard::VacantAt { last_token: 3 }
        ));
    }

    #[test]
    fn one_member_held_refuses_the_whole_set_and_writes_nothing_of_it() {
        let (free, taken) = (LeaseState::vacant(0), held("other", 7));
        let folded = fold(
            &[(take("me"), &free), (take("me"), &taken)],
            "resources",
            None,
            NOW,
        );
        assert!(!folded.granted);
        assert!(folded.writes.is_empty(), "{:?}", folded.writes);
        // Each member as it stands: the free one is not taken.
        assert_eq!(folded.after, vec![free.clone(), taken.clone()]);
        let paths: Vec<&str> = folded.witnesses.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["/resources/1"]);
        assert_eq!(folded.witnesses[0].rule_id, "LEASE_HELD");
    }

    #[test]
    fn every_blocking_member_is_named_at_its_index() {
        let taken = held("other", 2);
        let folded = fold(
            &[
                (take("me"), &taken),
                (take("me"), &LeaseState::default()),
                (take("me"), &taken),
            ],
            "resources",
            None,
            NOW,
        );
        let paths: Vec<&str> = folded.witnesses.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["/resources/0", "/resources/2"]);
    }

    #[test]
    fn a_renew_of_a_set_extends_each_and_names_a_stale_token_by_its_lease() {
        let (a, b) = (held("me", 1), held("me", 4));
        let renew = |token| {
            Mutation::Hold(HolderOp::Renew {
                holder: "me",
                token,
                ttl_ms: 60_000,
                value: None,
            })
        };
        let ok = fold(&[(renew(1), &a), (renew(4), &b)], "leases", None, NOW);
        assert!(ok.granted);
        for (after, token) in ok.after.iter().zip([1, 4]) {
            let permit = after.live(NOW).expect("still held");
            assert_eq!((permit.token, permit.expires_at), (token, NOW + 60_000));
        }
        assert!(ok.writes.iter().all(|(_, w)| w.effect
            == Effect::Extend {
                expires_at: NOW + 60_000
            }));
        let stale = fold(&[(renew(1), &a), (renew(3), &b)], "leases", None, NOW);
        assert!(!stale.granted);
        assert_eq!(stale.witnesses[0].path, "/leases/1");
        assert_eq!(stale.after, vec![a, b]);
    }

    #[test]
    fn a_refused_set_still_writes_the_hand_off_its_read_noticed() {
        // A semaphore whose one permit lapsed with a waiter behind it: the refusal of the set
        // (its other member is held) writes that hand-off, and only that.
        let mut queued = LeaseState::default();
        let first = Asked {
            holder: "a",
            ttl_ms: 3_000,
            limit: 1,
            wait_ms: 10_000,
            ticket: None,
            session: None,
            value: None,
        };
        let Acquired::Write(write) = acquire(&queued, &first, NOW - 5_000) else {
            panic!("a free lease is taken");
        };
        queued = write.effect.apply(&queued);
        let waiter = Asked {
            holder: "b",
            wait_ms: 20_000,
            ..first
        };
        if let Acquired::Queue {
            write: Some(write), ..
        } = acquire(&queued, &waiter, NOW - 4_000)
        {
            queued = write.effect.apply(&queued);
        } else {
            panic!("b waits behind a");
        }
        // Now a's permit has lapsed: b's turn, which nobody wrote yet.
        let taken = held("other", 9);
        let folded = fold(
            &[(take("me"), &queued), (take("me"), &taken)],
            "resources",
            None,
            NOW,
        );
        assert!(!folded.granted);
        assert_eq!(folded.writes.len(), 1, "{:?}", folded.writes);
        assert_eq!(folded.writes[0].0, 0);
        assert_eq!(folded.after[0].live(NOW).map(|p| p.holder), Some("b"));
        assert_eq!(folded.after[1], taken);
    }

    /// A permit of `holder` with `token`, which an operator revoked.
    fn revoked(holder: &str, token: u64) -> LeaseState {
        let state = held(holder, token);
        let revoke = crate::lease::decide::revoke(&state, Some(holder), None, NOW);
        let crate::lease::decide::Revocation::End(write) = revoke else {
            panic!("a live permit is revoked");
        };
        write.effect.apply(&state)
    }

    #[test]
    fn a_sets_release_ends_what_it_holds_and_reports_a_revoked_member() {
        let (a, b, c) = (held("me", 1), revoked("me", 2), held("me", 3));
        let release = |token| {
            Mutation::Hold(HolderOp::Release {
                holder: "me",
                token,
                done: None,
            })
        };
        let folded = fold(
            &[(release(1), &a), (release(2), &b), (release(3), &c)],
            "leases",
            None,
            NOW,
        );
        assert!(folded.granted, "{folded:?}");
        assert_eq!(
            folded.writes.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            [0, 2]
        );
        assert!(folded.after[0].live(NOW).is_none() && folded.after[2].live(NOW).is_none());
        let said: Vec<(&str, &str)> = folded
            .witnesses
            .iter()
            .map(|w| (w.rule_id.as_str(), w.path.as_str()))
            .collect();
        assert_eq!(said, [("REVOKED", "/leases/1")]);
        assert_eq!(folded.ended_already, [1]);
        // A renew of the same set is refused whole: the holder must acquire B again.
        let renew = |token| {
            Mutation::Hold(HolderOp::Renew {
                holder: "me",
                token,
                ttl_ms: 60_000,
                value: None,
            })
        };
        let renewed = fold(
            &[(renew(1), &a), (renew(2), &b), (renew(3), &c)],
            "leases",
            None,
            NOW,
        );
        assert!(!renewed.granted);
        assert!(renewed.writes.is_empty());
        assert_eq!(renewed.witnesses[0].rule_id, "REVOKED");
        // And a release that another reason stops (a wrong token) still frees nothing.
        let wrong = fold(
            &[(release(1), &a), (release(2), &b), (release(9), &c)],
            "leases",
            None,
            NOW,
        );
        assert!(!wrong.granted && wrong.writes.is_empty());
        let paths: Vec<&str> = wrong.witnesses.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["/leases/1", "/leases/2"]);
    }
}
