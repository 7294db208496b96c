//! The one retry loop of the lease service (docs/adr/0009): get the state, plan on it, commit,
//! and go round again while the lease changes under the plan.
//!
//! The state of a round is, first, the op's guess (planned on this process's view, no read), or
//! the view a waiter was woken with ([`Engine::run_on`]); then the lease a failed guard
//! returned; and only when none came back, a read. A read that finds the request's record ends
//! the rounds with it (a replay), unless the record is this very input's waiting place, which
//! the op resumes. The engine knows no op: each is a [`Planner`].

use super::LeaseError;
use super::views::Views;
use crate::clock::Millis;
use crate::lease::LeaseState;
use crate::lease::session::{Move, Session, moves};
use crate::service::waiting::Waits;
use crate::store::session_store::{Joined, SessionChange, SessionKey};
use crate::store::{Commit, LeaseKey, Outcome, RecordKey, Rounds, Snapshot, StoredRecord};
use std::collections::BTreeMap;

/// Rounds before giving up on a lease that keeps changing under us. Every lost round means
/// another writer committed in between: on a semaphore, where every permit's write goes through
/// the one version, that is many clients at once, so lost rounds back off (see [`back_off`]) and
/// there are enough of them for some 60 writers arriving together.
pub(super) const MAX_ROUNDS: usize = 64;

/// What an op is asked on a state the store showed.
pub(super) struct Given<'a> {
    /// The leases of the planner's keys, in its order.
    pub leases: &'a [LeaseState],
    /// Whether this input's waiting place holds the requestId already (an earlier round of a
    /// wait, or the call this one retries): resumed, not replayed.
    pub place_recorded: bool,
    /// The target's session, as read with the leases (`None`: there is none, or none was asked).
    pub session: Option<&'a Session>,
}

/// One round's plan: what to commit, and what the op answers if it commits.
pub(super) struct Attempt<D> {
    /// Nothing to commit: the decision is the answer now.
    pub commit: Option<Commit>,
    /// The leases the commit writes, each with the state it leaves: remembered in the views,
    /// and their waiters woken, once committed.
    pub leaves: Vec<(LeaseKey, LeaseState)>,
    pub decision: D,
    /// Planned on this process's view, not on the store's state: such a plan that meets this
    /// input's waiting place is decided again on a read (the view does not show what was handed
    /// to the place), and its losing costs no pause.
    pub guessed: bool,
}

impl<D> Attempt<D> {
    /// `writes`, `audit` entries and the request's `record` committed in one transaction, planned
    /// on the store's state; answered `decision` once committed, leaving `leaves`.
    pub fn together(
        writes: Vec<(LeaseKey, crate::lease::Write)>,
        audit: Vec<(crate::tenant::Tenant, crate::lease::answer::AuditEntry)>,
        record: Option<crate::store::RecordPut>,
        leaves: Vec<(LeaseKey, LeaseState)>,
        decision: D,
    ) -> Self {
        Self {
            commit: Some(Commit::Together {
                writes,
                unchanged: None,
                audit,
                sessions: Vec::new(),
                record,
            }),
            leaves,
            decision,
            guessed: false,
        }
    }
}

/// What an op's rounds read and write.
#[derive(Debug, Clone)]
pub(super) struct Target {
    /// The leases; the first is the one a failed guard returns.
    pub keys: Vec<LeaseKey>,
    /// The request's record, when it has a requestId.
    pub record: Option<RecordKey>,
    /// The request's input, as its record names it (empty without a record: nothing compares it).
    pub fingerprint: String,
    /// The session the op works on or acquires in, read with the leases (docs/adr/0010). Its
    /// rounds are planned only on reads: no guess, no lease handed back by a failed guard.
    pub session: Option<SessionKey>,
}

/// An op, as the engine runs it.
pub(super) trait Planner {
    /// What the op decides: its answer, once committed.
    type Decision;

    /// The first round's plan without a read, when this process's `views` make one worth
    /// trying. None: the op reads first.
    fn guess(&mut self, _views: &Views) -> Result<Option<Attempt<Self::Decision>>, LeaseError> {
        Ok(None)
    }

    /// The plan on the store's state.
    fn plan(&mut self, given: Given<'_>) -> Result<Attempt<Self::Decision>, LeaseError>;
}

/// How the rounds ended.
#[derive(Debug)]
pub(super) enum Ended<D> {
    /// The plan committed (or had nothing to commit). `left` is the lease a lone write left, as
    /// the store told it (a write whose outcome its plan could not know, such as an unseen take's
    /// token).
    Done {
        decision: D,
        left: Option<LeaseState>,
    },
    /// The requestId's live record: its answer is the request's.
    Replay(StoredRecord),
}

/// The engine for one request: the store, this process's views and waiters, and the request's
/// `now`.
pub(super) struct Engine<'a, S> {
    pub store: &'a S,
    pub views: &'a Views,
    pub waits: &'a Waits,
    pub now: Millis,
}

impl<S: Rounds + Sync> Engine<'_, S> {
    /// Run `planner` on `target` until a plan commits, a record answers, or [`MAX_ROUNDS`] are
    /// lost.
    pub async fn run<P: Planner>(
        &self,
        target: &Target,
        planner: &mut P,
    ) -> Result<Ended<P::Decision>, LeaseError> {
        // A session-bound op plans on its session as read, never on a view.
        let guess = match target.session {
            Some(_) => None,
            None => planner.guess(self.views)?,
        };
        self.rounds(target, planner, guess, None, false).await
    }

    /// Run `planner` on `target` as [`Engine::run`] does, its first round planned on `seen`, the
    /// lease as the last write of it in this process left it, with no read: what a failed guard
    /// returns is no better. A waiter woken by the write that handed it a permit takes it so,
    /// in one store call instead of two (the attack of 2026-12-07 found waiters answered up to
    /// 170 ms after the release, with every store call queued behind a saturated server's).
    /// `place_recorded`: this input's waiting place holds the requestId already. Only for one
    /// lease outside a session (a session's state comes only from a read).
    pub async fn run_on<P: Planner>(
        &self,
        target: &Target,
        planner: &mut P,
        seen: LeaseState,
        place_recorded: bool,
    ) -> Result<Ended<P::Decision>, LeaseError> {
        let seen = (target.keys.len() == 1 && target.session.is_none()).then_some(seen);
        self.rounds(target, planner, None, seen, place_recorded)
            .await
    }

    async fn rounds<P: Planner>(
        &self,
        target: &Target,
        planner: &mut P,
        mut guess: Option<Attempt<P::Decision>>,
        // The lease a failed guard returned: the next round's state, with no read.
        mut returned: Option<LeaseState>,
        mut place_recorded: bool,
    ) -> Result<Ended<P::Decision>, LeaseError> {
        // Whether `returned` is the last write's view (see `run_on`), not a guard's: a plan on it
        // stands only if it writes the lease, guarded; any other is made again on a read.
        let mut on_view = returned.is_some();
        // Commits lost that were planned on the store's own state: a sign of rivals.
        let mut lost = 0;
        for _ in 0..MAX_ROUNDS {
            back_off(lost).await;
            let plan = match (guess.take(), returned.take()) {
                (Some(plan), _) => plan,
                (None, Some(current)) => planner.plan(Given {
                    leases: std::slice::from_ref(&current),
                    place_recorded,
                    session: None,
                })?,
                (None, None) => {
                    let snapshot = self
                        .store
                        .read(
                            target.keys.as_slice(),
                            target.record.as_ref(),
                            target.session.as_ref(),
                            self.now,
                        )
                        .await?;
                    if let Some(record) = &snapshot.record {
                        if !is_place_of(record, &target.fingerprint) {
                            return Ok(Ended::Replay(record.clone()));
                        }
                        place_recorded = true;
                    }
                    for (key, state) in target.keys.iter().zip(&snapshot.leases) {
                        self.views.put(key, state);
                    }
                    let plan = planner.plan(Given {
                        leases: &snapshot.leases,
                        place_recorded,
                        session: snapshot.session.as_ref(),
                    })?;
                    with_session_moves(plan, target, &snapshot, self.now)
                }
            };
            if std::mem::take(&mut on_view) && !plan.commit.as_ref().is_some_and(writes_lease) {
                continue;
            }
            let Some(commit) = &plan.commit else {
                return Ok(Ended::Done {
                    decision: plan.decision,
                    left: None,
                });
            };
            if !plan.guessed {
                lost += 1;
            }
            match self.store.commit(commit, self.now).await? {
                Outcome::Committed(left) => {
                    let lone = match (&left, commit) {
                        (Some(after), Commit::Lone { key, .. }) => Some((key, after)),
                        _ => None,
                    };
                    match lone {
                        Some((key, after)) => self.committed(key, after),
                        None => {
                            for (key, after) in &plan.leaves {
                                self.committed(key, after);
                            }
                        }
                    }
                    return Ok(Ended::Done {
                        decision: plan.decision,
                        left,
                    });
                }
                // This input's place, met by a plan made on the view: decided again on the
                // store's state, which says what was handed to it.
                Outcome::RecordExists(record)
                    if plan.guessed && is_place_of(&record, &target.fingerprint) => {}
                Outcome::RecordExists(record) => return Ok(Ended::Replay(record)),
                // The lease as its guard saw it: the next round plans on it, with no read. Only
                // for one lease: a set's other members may have changed too.
                Outcome::Changed(Some(current))
                    if target.keys.len() == 1 && target.session.is_none() =>
                {
                    self.views.put(&target.keys[0], &current);
                    returned = Some(current);
                }
                Outcome::Changed(_) => {}
            }
        }
        Err(LeaseError::Contention)
    }

    /// A write of `key` committed, leaving `after`: remembered, and this process's waiters for it
    /// woken.
    fn committed(&self, key: &LeaseKey, after: &LeaseState) {
        self.views.put(key, after);
        self.waits.wake(key, after.version);
    }
}

/// `plan`, made on `snapshot`, with the changes its writes make to the lists of the sessions
/// their permits are in (docs/adr/0010), committed with them: a permit that joins a session
/// (only under the session's conditions: it lives, it has room), a live one that leaves it. Only
/// plans made on a read can move a session's permit: a view or a lease a guard handed back never
/// has one.
fn with_session_moves<D>(
    mut plan: Attempt<D>,
    target: &Target,
    snapshot: &Snapshot,
    now: Millis,
) -> Attempt<D> {
    let mut changes: BTreeMap<SessionKey, (Vec<Joined>, Vec<String>)> = BTreeMap::new();
    for (key, after) in &plan.leaves {
        let Some(at) = target.keys.iter().position(|k| k == key) else {
            continue;
        };
        let before = &snapshot.leases[at];
        for moved in moves(before, after, now) {
            let resource = key.resource().to_owned();
            match moved {
                Move::Join { session, permit } => {
                    let listed = snapshot
                        .session
                        .as_ref()
                        .is_some_and(|s| s.id == session && s.permits.contains_key(&resource));
                    let joined = Joined {
                        resource,
                        permit,
                        listed,
                    };
                    let entry = changes.entry(key.session(&session)).or_default();
                    entry.0.push(joined);
                }
                Move::Leave { session } => {
                    let entry = changes.entry(key.session(&session)).or_default();
                    entry.1.push(resource);
                }
            }
        }
    }
    if changes.is_empty() {
        return plan;
    }
    let sessions = changes
        .into_iter()
        .map(|(key, (joins, leaves))| (key, SessionChange::Permits { joins, leaves }));
    plan.commit = match plan.commit.take() {
        Some(Commit::Lone { key, write }) => Some(Commit::Together {
            writes: vec![(key, write)],
            unchanged: None,
            audit: Vec::new(),
            sessions: sessions.collect(),
            record: None,
        }),
        Some(Commit::Together {
            writes,
            unchanged,
            audit,
            sessions: mut already,
            record,
        }) => {
            already.extend(sessions);
            Some(Commit::Together {
                writes,
                unchanged,
                audit,
                sessions: already,
                record,
            })
        }
        None => None,
    };
    plan
}

/// Whether `commit` writes a lease: every such write is guarded by the state it was planned on.
fn writes_lease(commit: &Commit) -> bool {
    match commit {
        Commit::Lone { .. } => true,
        Commit::Together { writes, .. } => !writes.is_empty(),
    }
}

/// Whether `record` is a waiting call's place of the input `fingerprint` names: resumed, not
/// replayed.
fn is_place_of(record: &StoredRecord, fingerprint: &str) -> bool {
    record.queued && record.fingerprint == fingerprint
}

/// Before a round, after `lost` commits planned on the store's state were lost: nothing before
/// the first loss (a guess that missed is no sign of rivals), then a random pause of up to 1, 2,
/// 4 ... 32 ms, so that writers who collided spread out instead of colliding again. Without it,
/// 30 clients acquiring one semaphore at once ran out of rounds (found by the attack of
/// 2026-12-02).
async fn back_off(lost: usize) {
    if lost == 0 {
        return;
    }
    let ceiling_ms = 1u64 << (lost - 1).min(5);
    let mut random = [0u8; 2];
    // Without randomness, the full pause: still spreads writers that took different rounds.
    let fraction = match getrandom::fill(&mut random) {
        Ok(()) => u64::from(u16::from_le_bytes(random)),
        Err(_) => u64::from(u16::MAX),
    };
    let micros = ceiling_ms * 1000 * fraction / u64::from(u16::MAX);
    tokio::time::sleep(std::time::Duration::from_micros(micros)).await;
}

#[cfg(test)]
mod tests;
