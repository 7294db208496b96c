//! A session's own ops (docs/adr/0010): open, keepalive, close, get and revoke of a session. Each is
//! one run of the round engine on the session's item and the request's record, no lease: the
//! session's permits are not written when it ends (their readers judge them through it), only
//! their waiters in this process are woken.

use super::answers::record_put;
use super::rounds::{Attempt, Ended, Given, Planner, Target};
use super::views::Views;
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::clock::Millis;
use crate::clock::iso8601;
use crate::lease::answer::{AuditEntry, Holder};
use crate::lease::session::{self, Session, SessionWrite, ended};
use crate::lease::{LeaseAnswer, Op};
use crate::store::session_store::{SessionChange, SessionKey, SessionWritten};
use crate::store::{Commit, call_id};
use crate::witness::Witness;

/// What a session op asks.
#[derive(Clone, Copy)]
pub(super) enum Asked<'a> {
    Open {
        holder: &'a str,
        ttl_ms: Millis,
    },
    Keepalive {
        holder: &'a str,
        ttl_ms: Option<Millis>,
    },
    Close {
        holder: &'a str,
    },
    Get,
    /// An operator ends it, and every permit in it, with a reason the audit keeps.
    Revoke {
        reason: &'a str,
    },
}

/// A new session's id: 128 random bits, lowercase base32 (26 characters): unguessable, so that
/// knowing a session's id is being told it.
fn new_id() -> Result<String, LeaseError> {
    let mut bits = [0u8; 16];
    getrandom::fill(&mut bits)
        .map_err(|e| LeaseError::Internal(format!("no randomness for a session id: {e}")))?;
    Ok(data_encoding::BASE32_NOPAD
        .encode(&bits)
        .to_ascii_lowercase())
}

struct SessionPlanner<'a> {
    call: &'a Call<'a>,
    target: &'a Target,
    asked: Asked<'a>,
    service: &'a LeaseService,
    /// open: the session it stores.
    opened: Option<(SessionKey, Session)>,
}

/// A session op's decision: its answer, and whether its write moves the session's end earlier
/// (a close, a revoke, a keepalive shorter than the last): its permits and places then lapse
/// before their waiters' timers, and the waiters here are woken.
type Decided = (SignedAnswer, bool);

impl SessionPlanner<'_> {
    fn op(&self) -> Op {
        self.call.request.op
    }

    /// The answer about `session` with `witnesses`, committed with its record when there is
    /// one and `change` to the session, when given (`sooner`: see [`Decided`]).
    fn attempt(
        &self,
        shown: Option<&Session>,
        witnesses: Vec<Witness>,
        change: Option<(SessionKey, SessionChange)>,
        sooner: bool,
    ) -> Result<Attempt<Decided>, LeaseError> {
        self.audited(shown, witnesses, change, sooner, None)
    }

    /// [`Self::attempt`], with a revoke's audit entry committed with it.
    fn audited(
        &self,
        shown: Option<&Session>,
        witnesses: Vec<Witness>,
        change: Option<(SessionKey, SessionChange)>,
        sooner: bool,
        entry: Option<AuditEntry>,
    ) -> Result<Attempt<Decided>, LeaseError> {
        let signing = &self.call.signing;
        let mut answer = LeaseAnswer::about_session(self.op(), shown, signing.now, witnesses);
        if let Some(entry) = &entry {
            answer.revoked = Some(entry.ended.clone());
        }
        let answer = self.service.sign(answer, signing)?;
        let record = match self.op().writes() {
            true => record_put(self.target, Some(&answer), signing, true)?,
            false => None,
        };
        let commit = match (change, record) {
            (None, None) => None,
            (change, record) => Some(Commit::Together {
                writes: Vec::new(),
                unchanged: None,
                audit: entry
                    .map(|e| (self.call.actor.tenant.clone(), e))
                    .into_iter()
                    .collect(),
                sessions: change.into_iter().collect(),
                record,
            }),
        };
        Ok(Attempt {
            commit,
            leaves: Vec::new(),
            decision: (answer, sooner),
            guessed: false,
        })
    }

    fn open(&self) -> Result<Attempt<Decided>, LeaseError> {
        let (key, session) = self
            .opened
            .clone()
            .ok_or_else(|| LeaseError::Internal("open without its session".into()))?;
        let change = (key, SessionChange::Open(session.clone()));
        self.attempt(Some(&session), Vec::new(), Some(change), false)
    }
}

impl SessionPlanner<'_> {
    /// An operator's revoke of the session `read`: it ends now, with every permit in it, and the
    /// audit keeps who, when, why, and the permits it ended (each with its resource).
    fn revoke(&self, read: Option<Session>, reason: &str) -> Result<Attempt<Decided>, LeaseError> {
        let now = self.call.signing.now;
        let decided = match &read {
            Some(s) => s.revoke(now),
            None => Err(vec![ended()]),
        };
        let (write, before) = match (decided, read) {
            (Ok(write), Some(before)) => (write, before),
            (Err(witnesses), read) => return self.attempt(read.as_ref(), witnesses, None, false),
            (Ok(_), None) => return Err(LeaseError::Internal("a revoke of no session".into())),
        };
        let ended: Vec<Holder> = before
            .permits
            .iter()
            .map(|(resource, p)| Holder {
                holder: before.holder.clone(),
                fencing_token: p.token,
                expires_at: iso8601(now),
                session: Some(before.id.clone()),
                value: None,
                resource: Some(resource.clone()),
            })
            .collect();
        let entry = AuditEntry {
            id: call_id()?,
            at: iso8601(now),
            actor: self.call.actor.id.to_owned(),
            resource: None,
            session: Some(before.id.clone()),
            ended,
            reason: reason.to_owned(),
            reopened: None,
        };
        let after = Session {
            expires_at: write.expires_at,
            ended: write.ended,
            ..before.clone()
        };
        let key = SessionKey::new(self.call.actor.tenant, &before.id);
        let sooner = write.ends_sooner_than(&before);
        let change = SessionChange::End {
            holder: None,
            write,
        };
        self.audited(
            Some(&after),
            Vec::new(),
            Some((key, change)),
            sooner,
            Some(entry),
        )
    }
}

impl Planner for SessionPlanner<'_> {
    type Decision = Decided;

    /// An open needs no read: its id is new.
    fn guess(&mut self, _views: &Views) -> Result<Option<Attempt<Decided>>, LeaseError> {
        match self.asked {
            Asked::Open { .. } => self.open().map(Some),
            _ => Ok(None),
        }
    }

    fn plan(&mut self, given: Given<'_>) -> Result<Attempt<Decided>, LeaseError> {
        let now = self.call.signing.now;
        let read = given.session.cloned();
        let (holder, decided) = match (self.asked, &read) {
            (Asked::Open { .. }, _) => return self.open(),
            (Asked::Get, _) => return self.attempt(read.as_ref(), Vec::new(), None, false),
            (Asked::Revoke { reason }, _) => return self.revoke(read, reason),
            (Asked::Keepalive { holder, .. } | Asked::Close { holder }, None) => {
                (holder, Err(vec![ended()]))
            }
            (Asked::Keepalive { holder, ttl_ms }, Some(s)) => {
                (holder, s.keepalive(holder, ttl_ms, now))
            }
            (Asked::Close { holder }, Some(s)) => (holder, s.close(holder, now)),
        };
        let key = self
            .target
            .session
            .clone()
            .ok_or_else(|| LeaseError::Internal("a session op without its session".into()))?;
        match (decided, read) {
            (Ok(write), Some(before)) => {
                let after = Session {
                    expires_at: write.expires_at,
                    ended: write.ended,
                    ..before.clone()
                };
                let sooner = write.ends_sooner_than(&before);
                let change = SessionChange::End {
                    holder: Some(holder.to_owned()),
                    write,
                };
                self.attempt(Some(&after), Vec::new(), Some((key, change)), sooner)
            }
            (Ok(_), None) => Err(LeaseError::Internal("a write of no session".into())),
            (Err(witnesses), read) => self.attempt(read.as_ref(), witnesses, None, false),
        }
    }
}

impl LeaseService {
    /// A holder's keepalive or close with no requestId (nothing to record): one conditional
    /// write of the session, no read first; a refusal hands back the session as it stood, which
    /// says why. `None`: not such a call, or one the rules would have let (the store disagreed:
    /// decided on a read instead).
    async fn by_holder(
        &self,
        call: &Call<'_>,
        target: &Target,
        asked: Asked<'_>,
    ) -> Result<Option<SignedAnswer>, LeaseError> {
        let Some(key) = &target.session else {
            return Ok(None);
        };
        let now = call.signing.now;
        let sessions = self.store.sessions();
        // Whether, written, it frees the session's permits and places sooner than their
        // waiters sleep until: a close, or a keepalive that moved the end earlier.
        let (written, sooner) = match asked {
            Asked::Keepalive { holder, ttl_ms } => {
                let kept = sessions.keep_alive(key, holder, ttl_ms, now).await?;
                (kept.written, kept.earlier)
            }
            Asked::Close { holder } => {
                let write = SessionWrite {
                    expires_at: now,
                    ended: Some(session::Ended::Closed),
                };
                let written = sessions.write_at(key, Some(holder), &write, now).await?;
                (written, true)
            }
            _ => return Ok(None),
        };
        let (shown, witnesses) = match written {
            SessionWritten::Done(after) => {
                if sooner {
                    self.wake_waiters_of(call);
                }
                (Some(after), Vec::new())
            }
            SessionWritten::Refused(old) => {
                let why = match (&old, asked) {
                    (None, _) => Err(vec![ended()]),
                    (Some(s), Asked::Keepalive { holder, ttl_ms }) => {
                        s.keepalive(holder, ttl_ms, now).map(|_| ())
                    }
                    (Some(s), Asked::Close { holder }) => s.close(holder, now).map(|_| ()),
                    (Some(_), _) => Ok(()),
                };
                match why {
                    Err(witnesses) => (old, witnesses),
                    Ok(()) => return Ok(None),
                }
            }
        };
        let answer = LeaseAnswer::about_session(call.request.op, shown.as_ref(), now, witnesses);
        self.sign(answer, &call.signing).map(Some)
    }

    /// Wake this process's waiters of every resource of the tenant: a session's end freed the
    /// resources it listed, and its places, which it does not list, may stand in front of
    /// waiters of others (the attack of 2026-12-05: they waited until the session's old end;
    /// the attack of 2026-12-07 found the same after a keepalive that shortened it).
    fn wake_waiters_of(&self, call: &Call<'_>) {
        self.waits.wake_tenant(call.actor.tenant);
    }

    /// A session's own op: open, keepalive, close, or get of a session.
    pub(super) async fn session_op(
        &self,
        call: &Call<'_>,
        asked: Asked<'_>,
    ) -> Result<SignedAnswer, LeaseError> {
        let mut target = call.target([]);
        let opened = match asked {
            Asked::Open { holder, ttl_ms } => {
                let id = new_id()?;
                let session = Session::open(&id, holder, ttl_ms, call.signing.now);
                Some((SessionKey::new(call.actor.tenant, &id), session))
            }
            _ => None,
        };
        // A read has nothing to replay: its requestId is ignored, as a resource's get's is.
        if !call.request.op.writes() {
            target.record = None;
        }
        if target.record.is_none()
            && let Some(answer) = self.by_holder(call, &target, asked).await?
        {
            return Ok(answer);
        }
        let mut planner = SessionPlanner {
            call,
            target: &target,
            asked,
            service: self,
            opened,
        };
        let (answer, sooner) = match self
            .engine(call.signing.now)
            .run(&target, &mut planner)
            .await?
        {
            Ended::Done { decision, .. } => decision,
            // The call that wrote it woke the waiters.
            Ended::Replay(record) => (self.replayed(&record, &target.fingerprint)?, false),
        };
        // A closed or revoked session's permits and places are gone now, and those of one kept
        // alive for less than before lapse before their waiters' timers: they are told at once.
        if sooner {
            self.wake_waiters_of(call);
        }
        Ok(answer)
    }
}
