//! A scripted store for the round engine's unit tests: each call answers the next line of its
//! script, and every call is written down, so a test states what the engine must ask and what
//! it is told. Beside it, a probe op that plans as a test says. Test-only: the DynamoDB store is
//! the one real implementation (docs/adr/0009).

use super::LeaseError;
use super::rounds::{Attempt, Ended, Engine, Given, Planner, Target};
use super::views::Views;
use crate::clock::Millis;
use crate::lease::{Effect, Guard, LeaseState, Write};
use crate::service::waiting::Waits;
use crate::store::session_store::SessionKey;
use crate::store::{
    Commit, LeaseKey, Outcome, RecordKey, Rounds, Snapshot, StoreError, StoredRecord,
};
use crate::tenant::Tenant;
use std::collections::VecDeque;
use std::sync::Mutex;

/// A call the engine made.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Asked {
    Read {
        keys: Vec<LeaseKey>,
        record: Option<RecordKey>,
    },
    Commit(Box<Commit>),
}

#[derive(Default)]
pub(super) struct Scripted {
    reads: Mutex<VecDeque<Result<Snapshot, StoreError>>>,
    commits: Mutex<VecDeque<Result<Outcome, StoreError>>>,
    asked: Mutex<Vec<Asked>>,
}

impl Scripted {
    /// The next read answers `snapshot`.
    pub fn read(self, snapshot: Result<Snapshot, StoreError>) -> Self {
        self.reads.lock().expect("script").push_back(snapshot);
        self
    }

    /// The next commit ends as `outcome`.
    pub fn commit(self, outcome: Result<Outcome, StoreError>) -> Self {
        self.commits.lock().expect("script").push_back(outcome);
        self
    }

    /// Every call made so far, in order.
    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().expect("script").clone()
    }

    /// Whether every scripted answer was asked for.
    pub fn played_out(&self) -> bool {
        self.reads.lock().expect("script").is_empty()
            && self.commits.lock().expect("script").is_empty()
    }
}

impl Rounds for Scripted {
    async fn read(
        &self,
        keys: &[LeaseKey],
        record: Option<&RecordKey>,
        _session: Option<&SessionKey>,
        _now: Millis,
    ) -> Result<Snapshot, StoreError> {
        self.asked.lock().expect("script").push(Asked::Read {
            keys: keys.to_vec(),
            record: record.cloned(),
        });
        let next = self.reads.lock().expect("script").pop_front();
        next.unwrap_or_else(|| panic!("a read the script does not have: {keys:?}"))
    }

    async fn commit(&self, commit: &Commit, _now: Millis) -> Result<Outcome, StoreError> {
        self.asked
            .lock()
            .expect("script")
            .push(Asked::Commit(Box::new(commit.clone())));
        let next = self.commits.lock().expect("script").pop_front();
        next.unwrap_or_else(|| panic!("a commit the script does not have: {commit:?}"))
    }
}

pub(super) const NOW: Millis = 1_000_000;

pub(super) fn tenant() -> Tenant {
    Tenant::for_account("acct").expect("a valid account")
}

pub(super) fn key(name: &str) -> LeaseKey {
    LeaseKey::new(&tenant(), name)
}

pub(super) fn write() -> Write {
    Write {
        guard: Guard::Vacant,
        effect: Effect::Take {
            holder: "a".into(),
            expires_at: NOW + 1_000,
        },
    }
}

pub(super) fn held(token: u64) -> LeaseState {
    LeaseState::granted(token, "other", NOW + 5_000)
}

pub(super) fn record(fingerprint: &str, queued: bool) -> StoredRecord {
    StoredRecord {
        fingerprint: fingerprint.into(),
        answer: if queued { String::new() } else { "{}".into() },
        expires_at: NOW + 60_000,
        paid_by: None,
        queued,
    }
}

pub(super) fn snapshot(
    leases: Vec<LeaseState>,
    record: Option<StoredRecord>,
) -> Result<Snapshot, StoreError> {
    Ok(Snapshot {
        leases,
        record,
        session: None,
    })
}

/// What a probe's plans commit.
#[derive(Clone, Copy)]
pub(super) enum Plans {
    Nothing,
    Lone,
    Together,
}

/// An op that plans as `plans` says on whatever it is given, and writes down what it was given.
pub(super) struct Probe {
    pub keys: Vec<LeaseKey>,
    pub record: Option<RecordKey>,
    pub guess: Option<Commit>,
    pub plans: Plans,
    pub given: Vec<(Vec<LeaseState>, bool)>,
}

impl Probe {
    pub fn new(keys: &[&str]) -> Self {
        Self {
            keys: keys.iter().map(|k| key(k)).collect(),
            record: None,
            guess: None,
            plans: Plans::Lone,
            given: Vec::new(),
        }
    }

    /// A probe of a request with a requestId, whose plans commit with it.
    pub fn recorded(keys: &[&str]) -> Self {
        Self {
            record: Some(RecordKey::new(&tenant(), "req-1")),
            plans: Plans::Together,
            ..Self::new(keys)
        }
    }

    pub fn lone(&self) -> Commit {
        Commit::Lone {
            key: self.keys[0].clone(),
            write: write(),
        }
    }

    pub fn together(&self) -> Commit {
        Commit::Together {
            writes: self.keys.iter().map(|k| (k.clone(), write())).collect(),
            unchanged: None,
            audit: Vec::new(),
            sessions: Vec::new(),
            record: None,
        }
    }
}

impl Planner for Probe {
    /// How many plans were made on the store's state.
    type Decision = usize;

    fn guess(&mut self, _: &Views) -> Result<Option<Attempt<usize>>, LeaseError> {
        Ok(self.guess.take().map(|commit| Attempt {
            commit: Some(commit),
            leaves: vec![(self.keys[0].clone(), held(1))],
            decision: 0,
            guessed: true,
        }))
    }

    fn plan(&mut self, given: Given<'_>) -> Result<Attempt<usize>, LeaseError> {
        self.given
            .push((given.leases.to_vec(), given.place_recorded));
        let commit = match self.plans {
            Plans::Nothing => None,
            Plans::Lone => Some(self.lone()),
            Plans::Together => Some(self.together()),
        };
        Ok(Attempt {
            commit,
            leaves: self.keys.iter().map(|k| (k.clone(), held(2))).collect(),
            decision: self.given.len(),
            guessed: false,
        })
    }
}

/// This process's views and waiters, as a service holds them.
#[derive(Default)]
pub(super) struct Parts {
    pub views: Views,
    pub waits: Waits,
}

impl Parts {
    pub async fn run(
        &self,
        store: &Scripted,
        probe: &mut Probe,
    ) -> Result<Ended<usize>, LeaseError> {
        let target = target_of(probe);
        self.engine(store).run(&target, probe).await
    }

    /// The rounds started from `seen` (see `Engine::run_on`).
    pub async fn run_on(
        &self,
        store: &Scripted,
        probe: &mut Probe,
        seen: LeaseState,
        place_recorded: bool,
    ) -> Result<Ended<usize>, LeaseError> {
        let target = target_of(probe);
        self.engine(store)
            .run_on(&target, probe, seen, place_recorded)
            .await
    }

    fn engine<'a>(&'a self, store: &'a Scripted) -> Engine<'a, Scripted> {
        Engine {
            store,
            views: &self.views,
            waits: &self.waits,
            now: NOW,
        }
    }

    /// The rounds, which must end with a plan done: its decision.
    pub async fn done(&self, store: &Scripted, probe: &mut Probe) -> usize {
        match self.run(store, probe).await {
            Ok(Ended::Done { decision, .. }) => decision,
            other => panic!("the rounds did not end with a plan done: {other:?}"),
        }
    }
}

fn target_of(probe: &Probe) -> Target {
    Target {
        keys: probe.keys.clone(),
        record: probe.record.clone(),
        fingerprint: "mine".into(),
        session: None,
    }
}

pub(super) fn read_of(probe: &Probe) -> Asked {
    Asked::Read {
        keys: probe.keys.clone(),
        record: probe.record.clone(),
    }
}
