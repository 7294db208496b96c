//! Sessions (docs/adr/0010): one heartbeat for many permits. The rules, pure: what open,
//! keepalive, close and a session-bound acquire may do to a session, and how a resource's
//! permits are judged through the sessions they are in.
//!
//! A session never comes back: once ended (closed, revoked, or lapsed: `now >= expires_at`) every
//! rule refuses it, so a reader that has seen it ended may rely on that without a condition.

use super::decide::{Write, with_holders_permits};
use super::model::LeaseState;
use crate::clock::Millis;
use crate::witness::Witness;
use serde_json::json;
use std::collections::BTreeMap;

/// The most live permits one session holds.
pub const MAX_SESSION_PERMITS: usize = 256;

/// How a session ended by a call (a lapse is no call: it is `now >= expires_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Closed,
    Revoked,
}

/// One of the session's permits, as the session lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPermit {
    pub token: u64,
    pub limit: u32,
}

/// One session as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub holder: String,
    /// The ttl it was opened with: a keepalive's default.
    pub ttl_ms: Millis,
    /// When it ends unless kept alive; a close or revoke sets it to the time it ended.
    pub expires_at: Millis,
    pub ended: Option<Ended>,
    /// Its permits, by resource: what `get` lists, what ending it wakes, what the limit counts.
    pub permits: BTreeMap<String, SessionPermit>,
}

/// What a keepalive or close changes: the session's new end, and whether a call ended it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionWrite {
    pub expires_at: Millis,
    pub ended: Option<Ended>,
}

impl SessionWrite {
    /// Whether it moves the end of `before` earlier: a close or revoke (it ends now), or a
    /// keepalive shorter than the last. Its permits and places then lapse before the time their
    /// waiters sleep until, the end they read: they must be told.
    pub fn ends_sooner_than(&self, before: &Session) -> bool {
        self.expires_at < before.expires_at
    }
}

impl Session {
    /// A session opened by `holder` at `now` for `ttl_ms`, with no permits yet.
    pub fn open(id: &str, holder: &str, ttl_ms: Millis, now: Millis) -> Self {
        Self {
            id: id.to_owned(),
            holder: holder.to_owned(),
            ttl_ms,
            expires_at: now + ttl_ms,
            ended: None,
            permits: BTreeMap::new(),
        }
    }

    /// Whether it lives at `now`: not ended by a call, not lapsed.
    pub fn is_live(&self, now: Millis) -> bool {
        self.ended.is_none() && now < self.expires_at
    }

    /// `holder` keeps it alive for `ttl_ms` (its own ttl when `None`) from `now`.
    pub fn keepalive(
        &self,
        holder: &str,
        ttl_ms: Option<Millis>,
        now: Millis,
    ) -> Result<SessionWrite, Vec<Witness>> {
        self.usable_by(holder, now)?;
        Ok(SessionWrite {
            expires_at: self.kept_until(ttl_ms, now),
            ended: None,
        })
    }

    /// Its end once kept alive at `now` for `ttl_ms` (`None`: the ttl it was opened with).
    pub fn kept_until(&self, ttl_ms: Option<Millis>, now: Millis) -> Millis {
        now + ttl_ms.unwrap_or(self.ttl_ms)
    }

    /// `holder` ends it, and every permit in it, at `now`.
    pub fn close(&self, holder: &str, now: Millis) -> Result<SessionWrite, Vec<Witness>> {
        self.usable_by(holder, now)?;
        Ok(SessionWrite {
            expires_at: now,
            ended: Some(Ended::Closed),
        })
    }

    /// An operator ends it at `now` (who may is the service's question, not the session's).
    pub fn revoke(&self, now: Millis) -> Result<SessionWrite, Vec<Witness>> {
        if !self.is_live(now) {
            return Err(vec![self.expired()]);
        }
        Ok(SessionWrite {
            expires_at: now,
            ended: Some(Ended::Revoked),
        })
    }

    /// Whether `holder` may take a permit of `resource` in it at `now`: its holder, live, and
    /// with room (a permit it already has of the resource takes no more room).
    pub fn admits(&self, holder: &str, resource: &str, now: Millis) -> Result<(), Vec<Witness>> {
        self.admits_all(holder, &[resource], now)
    }

    /// [`Self::admits`] of every one of `resources` at once (a set's acquire): room for all of
    /// those it does not have.
    pub fn admits_all(
        &self,
        holder: &str,
        resources: &[&str],
        now: Millis,
    ) -> Result<(), Vec<Witness>> {
        self.usable_by(holder, now)?;
        let new = resources
            .iter()
            .filter(|r| !self.permits.contains_key(**r))
            .count();
        let room = self.permits.len() + new <= MAX_SESSION_PERMITS;
        if !room {
            return Err(vec![
                Witness::new(
                    "SESSION_FULL",
                    "/session",
                    format!("a session holds at most {MAX_SESSION_PERMITS} permits"),
                )
                .expected(format!("fewer than {MAX_SESSION_PERMITS} permits"))
                .actual(self.permits.len()),
            ]);
        }
        Ok(())
    }

    /// The rules every use of it by `holder` shares: it is theirs, and it lives.
    fn usable_by(&self, holder: &str, now: Millis) -> Result<(), Vec<Witness>> {
        if !self.is_live(now) {
            return Err(vec![self.expired()]);
        }
        if self.holder != holder {
            let witness = Witness::new("NOT_HOLDER", "/holder", "the session is another holder's")
                .expected(json!({"holder": self.holder}))
                .actual(holder);
            return Err(vec![witness]);
        }
        Ok(())
    }

    fn expired(&self) -> Witness {
        ended()
    }
}

/// The witness of a session that has ended (closed, revoked, lapsed) or that the tenant never
/// had: to a caller they are the same, as DynamoDB's clean-up may remove an ended one.
pub fn ended() -> Witness {
    Witness::new(
        "SESSION_EXPIRED",
        "/session",
        "the session has ended (closed, revoked or lapsed) or is unknown: its permits are free",
    )
    .expected("a live session")
}

/// The end of each session a resource's permits name, as read: a session that is unknown (never
/// opened here, another tenant's, cleaned up) or ended maps to the time it ended, or is absent.
pub type SessionEnds = BTreeMap<String, Millis>;

/// The end of `session` as a reader judges it at `now`: its expiry while it lives; once ended,
/// no later than now (it may have ended earlier, which changes nothing a rule decides at `now`).
pub fn end_of(session: Option<&Session>, now: Millis) -> Millis {
    match session {
        Some(s) if s.is_live(now) => s.expires_at,
        Some(s) => s.expires_at.min(now),
        None => now,
    }
}

/// `state` with each session permit's expiry made its session's, as read (`ends`), and each
/// place of a call that waited in a session ending with it; a permit or place whose session is
/// not in `ends` is judged ended at `now`. Permits and places outside sessions are as they were.
/// What `decide` is then given: it judges expiries, as it always has (so a place whose session
/// ended is skipped, and the waiters behind it are served: the attack of 2026-12-05).
pub fn resolve(state: &LeaseState, ends: &SessionEnds, now: Millis) -> LeaseState {
    let end = |id: &str| ends.get(id).copied().unwrap_or(now);
    let mut resolved = state.clone();
    for permit in &mut resolved.permits {
        if let Some(id) = &permit.session {
            permit.expires_at = end(id).min(permit.expires_at);
        }
    }
    for place in &mut resolved.waiters {
        if let Some(id) = &place.session {
            place.session_ends = Some(end(id));
        }
    }
    resolved
}

/// The sessions `state`'s permits and places name: what a read reads to [`resolve`] it.
pub fn named(state: &LeaseState) -> impl Iterator<Item = &str> {
    let permits = state.permits.iter().filter_map(|p| p.session.as_deref());
    permits.chain(state.waiters.iter().filter_map(|w| w.session.as_deref()))
}

/// What a write means for the session of the permit it grants or keeps for its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding<'a> {
    /// An acquire in the session `id`: the holder's permit lives in it (its expiry, which the
    /// acquire was decided with, is the session's end as read).
    In(&'a str),
    /// An acquire with a ttl of its own: the holder's permit lives that long, in no session
    /// (a permit it had in a session leaves it).
    Own,
    /// A renew: a permit in a session stays in it, with its end (a renew changes only what is
    /// its own: its value).
    Kept,
}

/// `write`, decided on the resolved `before` for `holder`, made true to the sessions of
/// `binding`. A write that then leaves a permit in a session is a version-guarded replace of the
/// whole item (docs/adr/0010), whatever the write was: so a lease's take or extend becomes one.
pub fn bind(before: &LeaseState, write: Write, holder: &str, binding: Binding<'_>) -> Write {
    with_holders_permits(before, write, holder, |had, permit| match binding {
        Binding::In(id) => permit.session = Some(id.to_owned()),
        Binding::Own => permit.session = None,
        Binding::Kept => {
            if let Some(had) = had.filter(|p| p.session.is_some()) {
                permit.session = had.session.clone();
                permit.expires_at = had.expires_at;
            }
        }
    })
}

/// How one write of a resource changes the lists of the sessions its permits are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// A permit joins `session`.
    Join {
        session: String,
        permit: SessionPermit,
    },
    /// `session`'s live permit of the resource ended, or left it.
    Leave { session: String },
}

/// The moves of a write that makes the resource's resolved state `before` (as of `now`) into
/// `after`: a permit of `after` in a session that `before` did not have in it joins it; a live
/// permit of `before` in a session that `after` does not keep in it leaves it. A lapsed one
/// does not: its session has ended, and an ended session's list is never shown. A permit handed
/// to a session's place is listed only once its holder takes it (a join is conditional on the
/// session living and having room, which only the taker's own acquire has read: a hand-off by
/// anyone else's write must not fail on it), so it joins then, and leaves only once taken.
pub fn moves(before: &LeaseState, after: &LeaseState, now: Millis) -> Vec<Move> {
    let in_session = |state: &LeaseState, token: u64, session: &str| {
        state.permits.iter().any(|p| {
            p.token == token && p.untaken.is_none() && p.session.as_deref() == Some(session)
        })
    };
    let leaves = before
        .permits
        .iter()
        .filter(|p| p.untaken.is_none())
        .filter_map(|p| {
            let session = p.session.as_deref()?;
            let left = now < p.expires_at && !in_session(after, p.token, session);
            left.then(|| Move::Leave {
                session: session.to_owned(),
            })
        });
    let joins = after
        .permits
        .iter()
        .filter(|p| p.untaken.is_none())
        .filter_map(|p| {
            let session = p.session.as_deref()?;
            (!in_session(before, p.token, session)).then(|| Move::Join {
                session: session.to_owned(),
                permit: SessionPermit {
                    token: p.token,
                    limit: after.limit,
                },
            })
        });
    leaves.chain(joins).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::model::Permit;

    const NOW: Millis = 1_795_946_400_000;

    fn session() -> Session {
        Session::open("s1", "agent-1", 30_000, NOW)
    }

    fn rule(result: Result<impl std::fmt::Debug, Vec<Witness>>) -> String {
        let witnesses = result.expect_err("refused");
        assert_eq!(witnesses.len(), 1, "{witnesses:?}");
        witnesses[0].rule_id.clone()
    }

    #[test]
    fn a_close_a_revoke_and_a_shorter_keepalive_end_it_sooner() {
        let s = session();
        let at = NOW + 1_000;
        assert!(s.close("agent-1", at).unwrap().ends_sooner_than(&s));
        assert!(s.revoke(at).unwrap().ends_sooner_than(&s));
        // 30 s from a second on ends after the end it had (NOW + 30 s); 5 s, before it.
        assert!(
            !s.keepalive("agent-1", None, at)
                .unwrap()
                .ends_sooner_than(&s)
        );
        assert!(
            s.keepalive("agent-1", Some(5_000), at)
                .unwrap()
                .ends_sooner_than(&s)
        );
        // The very end it had: not sooner.
        let same = s.keepalive("agent-1", Some(29_000), at).unwrap();
        assert!(!same.ends_sooner_than(&s));
    }

    #[test]
    fn a_keepalive_moves_the_end_by_the_ttl_asked_or_the_sessions_own() {
        let s = session();
        assert_eq!(s.expires_at, NOW + 30_000);
        let later = NOW + 20_000;
        assert_eq!(
            s.keepalive("agent-1", None, later).unwrap().expires_at,
            later + 30_000
        );
        assert_eq!(
            s.keepalive("agent-1", Some(5_000), later)
                .unwrap()
                .expires_at,
            later + 5_000
        );
    }

    #[test]
    fn only_its_holder_uses_it_and_only_while_it_lives() {
        let s = session();
        assert_eq!(rule(s.keepalive("agent-2", None, NOW)), "NOT_HOLDER");
        assert_eq!(rule(s.close("agent-2", NOW)), "NOT_HOLDER");
        assert_eq!(rule(s.admits("agent-2", "r", NOW)), "NOT_HOLDER");
        // Lapsed at exactly its expiry: held while now < expiresAt, as a lease is.
        let lapsed = NOW + 30_000;
        assert_eq!(
            rule(s.keepalive("agent-1", None, lapsed)),
            "SESSION_EXPIRED"
        );
        assert_eq!(rule(s.admits("agent-1", "r", lapsed)), "SESSION_EXPIRED");
        assert_eq!(rule(s.close("agent-1", lapsed)), "SESSION_EXPIRED");
        assert_eq!(rule(s.revoke(lapsed)), "SESSION_EXPIRED");
        // A lapsed session refuses even another holder as ended first: it does not exist any more.
        assert_eq!(
            rule(s.keepalive("agent-2", None, lapsed)),
            "SESSION_EXPIRED"
        );
    }

    #[test]
    fn an_ended_session_never_comes_back() {
        for ended in [Ended::Closed, Ended::Revoked] {
            let write = match ended {
                Ended::Closed => session().close("agent-1", NOW + 1_000).unwrap(),
                Ended::Revoked => session().revoke(NOW + 1_000).unwrap(),
            };
            assert_eq!(
                write,
                SessionWrite {
                    expires_at: NOW + 1_000,
                    ended: Some(ended)
                }
            );
            let s = Session {
                expires_at: write.expires_at,
                ended: write.ended,
                ..session()
            };
            for now in [NOW + 1_000, NOW + 2_000, NOW + 1_000_000] {
                assert!(!s.is_live(now));
                assert_eq!(rule(s.keepalive("agent-1", None, now)), "SESSION_EXPIRED");
                assert_eq!(rule(s.admits("agent-1", "r", now)), "SESSION_EXPIRED");
            }
            // Even before the time it was set to end: a close is final at once.
            let early = Session {
                expires_at: NOW + 60_000,
                ..s
            };
            assert!(!early.is_live(NOW + 1_500));
        }
    }

    #[test]
    fn it_holds_at_most_256_permits_and_a_permit_it_has_takes_no_more_room() {
        let mut s = session();
        for i in 0..MAX_SESSION_PERMITS {
            assert!(s.admits("agent-1", &format!("r{i}"), NOW).is_ok());
            s.permits
                .insert(format!("r{i}"), SessionPermit { token: 1, limit: 1 });
        }
        let full = s.admits("agent-1", "one-more", NOW).unwrap_err().remove(0);
        assert_eq!(
            (full.rule_id.as_str(), full.actual),
            ("SESSION_FULL", Some(json!(256)))
        );
        assert!(
            s.admits("agent-1", "r7", NOW).is_ok(),
            "a re-acquire of its own"
        );
    }

    #[test]
    fn a_resources_permits_are_judged_through_their_sessions() {
        let forever = Millis::MAX;
        let mut state = LeaseState::granted(7, "agent-1", forever);
        state.limit = 3;
        state.permits[0].session = Some("live".into());
        state.permits.push(Permit {
            session: Some("gone".into()),
            ..Permit::new("agent-2", 6, forever)
        });
        state.permits.push(Permit::new("worker", 5, NOW + 10_000));
        state.permits.push(Permit {
            session: Some("closed".into()),
            ..Permit::new("agent-3", 4, forever)
        });
        let closed = Session {
            ended: Some(Ended::Closed),
            expires_at: NOW - 5_000,
            ..session()
        };
        let live = Session {
            expires_at: NOW + 45_000,
            ..session()
        };
        let ends: SessionEnds = [
            ("live".to_owned(), end_of(Some(&live), NOW)),
            ("closed".to_owned(), end_of(Some(&closed), NOW)),
        ]
        .into();
        let resolved = resolve(&state, &ends, NOW);
        let live_tokens: Vec<u64> = resolved.live_permits(NOW).iter().map(|p| p.token).collect();
        assert_eq!(
            live_tokens,
            [5, 7],
            "the unknown and the closed session's permits are free"
        );
        assert_eq!(
            resolved.permits[0].expires_at,
            NOW + 45_000,
            "the live session's end"
        );
        assert_eq!(
            resolved.permits[2].expires_at,
            NOW + 10_000,
            "a permit outside sessions"
        );
        assert!(!resolved.is_current(4, None, NOW) && !resolved.is_current(6, None, NOW));
        assert!(resolved.is_current(7, Some("agent-1"), NOW));
        // The live session lapses: its permit with it, at that instant.
        let later = NOW + 45_000;
        let ends: SessionEnds = [("live".to_owned(), end_of(Some(&live), later))].into();
        assert!(!resolve(&state, &ends, later).is_current(7, None, later));
    }

    #[test]
    fn a_permit_handed_to_a_sessions_place_joins_its_list_only_when_taken() {
        let free = LeaseState::default();
        let handed = LeaseState {
            permits: vec![Permit {
                session: Some("s1".into()),
                untaken: Some(NOW + 30_000),
                ..Permit::new("agent-1", 1, NOW + 30_000)
            }],
            ..LeaseState::default()
        };
        // The hand-off is anyone's write: no join, whose conditions only the taker has read.
        assert_eq!(moves(&free, &handed, NOW), []);
        let mut taken = handed.clone();
        taken.permits[0].untaken = None;
        let joined = moves(&handed, &taken, NOW);
        assert!(
            matches!(&joined[..], [Move::Join { session, permit }] if session == "s1" && permit.token == 1),
            "{joined:?}"
        );
        // Never listed, it never leaves: its end needs no write to the session.
        assert_eq!(moves(&handed, &free, NOW), []);
        assert_eq!(moves(&taken, &free, NOW).len(), 1);
        // Stored with the place's end, which is how a read tells it from a taken one.
        assert_eq!(handed.permits[0].stored_expiry(), NOW + 30_000);
        assert_eq!(
            taken.permits[0].stored_expiry(),
            crate::lease::model::UNTIL_ITS_SESSION_ENDS
        );
    }

    #[test]
    fn a_place_waiting_in_a_session_ends_with_it() {
        use crate::lease::model::Place;
        let place = |holder: &str, session: Option<&str>| Place {
            holder: holder.into(),
            limit: 1,
            until: NOW + 30_000,
            ticket: None,
            session: session.map(str::to_owned),
            session_ends: None,
            value: None,
        };
        let state = LeaseState {
            waiters: vec![
                place("a", Some("gone")),
                place("b", Some("live")),
                place("c", None),
            ],
            ..LeaseState::granted(1, "x", NOW + 5_000)
        };
        assert!(state.names_a_session());
        let ends: SessionEnds = [("live".to_owned(), NOW + 10_000)].into();
        let resolved = resolve(&state, &ends, NOW);
        let untils: Vec<Millis> = resolved.waiters.iter().map(Place::lapses_at).collect();
        assert_eq!(untils, [NOW, NOW + 10_000, NOW + 30_000]);
        assert_eq!(named(&state).collect::<Vec<_>>(), ["gone", "live"]);
    }
}
