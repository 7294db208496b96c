//! The stored state of one resource, as the domain sees it: its counter and its permits.

use crate::clock::Millis;

/// Fencing tokens stay at or below 2^53 - 1 so that every JSON reader takes them exactly.
pub const MAX_TOKEN: u64 = (1 << 53) - 1;

/// One grant of the resource: `holder` holds it with `token` while `now < expires_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    pub holder: String,
    pub token: u64,
    pub expires_at: Millis,
    /// A permit handed to a place whose waiting call had a requestId, until that call (or its
    /// retry) takes it: the grant that call is answered (docs/adr/0008).
    pub handoff: Option<Handoff>,
    /// The session it lives in (docs/adr/0010): its expiry is then the session's, resolved
    /// between the read and the rules (`lease::session::resolve`).
    pub session: Option<String>,
    /// Handed from the queue to a place in `session`, and not taken yet by its holder's acquire:
    /// the place's own end. It lasts no longer than the place, nor than the session (a read
    /// makes `expires_at` the earlier: a keepalive moves it, up to the place's end); it joins the
    /// session's list only when taken. Stored as a session permit with this expiry of its own,
    /// which is how a read tells it (docs/adr/0010).
    pub untaken: Option<Millis>,
    /// The holder's note (docs/adr/0011): set by its acquire, changed by a renew.
    pub value: Option<String>,
}

/// A session permit's expiry as stored: "never by itself" (9999-12-31T23:59:59.999Z). Every
/// guard on the stored item then sees it live, so nothing takes the resource over it without
/// reading its session first (docs/adr/0010); a read makes it the session's end.
pub const UNTIL_ITS_SESSION_ENDS: Millis = 253_402_300_799_999;

impl Permit {
    /// Its expiry as the store keeps it: a session's permit lives until its session ends,
    /// whatever `expires_at` a read resolved it to.
    /// One handed to a session's place and not taken lives no longer than the place.
    pub fn stored_expiry(&self) -> Millis {
        match (&self.session, self.untaken) {
            (Some(_), Some(place_ends)) => place_ends,
            (Some(_), None) => UNTIL_ITS_SESSION_ENDS,
            (None, _) => self.expires_at,
        }
    }

    pub fn new(holder: &str, token: u64, expires_at: Millis) -> Self {
        Self {
            holder: holder.to_owned(),
            token,
            expires_at,
            handoff: None,
            session: None,
            untaken: None,
            value: None,
        }
    }
}

/// A waiting call with a requestId, as its place and the permit handed to it name it: what
/// lets the call's retry be answered the grant it was handed between its calls, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    /// A digest of the requestId and the request's input (its fingerprint), hex.
    pub key: String,
    /// When the request's record stops being replayed: the ticket means nothing after. Tickets
    /// are told apart by `key` alone (a retry's own record would end later).
    pub until: Millis,
}

/// The grant handed to a waiting call: its ticket, when, and until when it was handed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    pub ticket: Ticket,
    pub at: Millis,
    pub expires_at: Millis,
}

/// A permit handed to a waiting call that ended (released, revoked, lapsed) before the call
/// came back for it: kept so that the call's retry replays that grant instead of taking another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedHandoff {
    pub holder: String,
    pub token: u64,
    /// The limit it was granted under.
    pub limit: u32,
    pub handoff: Handoff,
}

/// The most ended hand-offs a resource remembers: each is some 100 bytes, rewritten by every
/// write of the resource, and one is kept only when a waiter went away with its grant.
pub const MAX_ENDED_HANDOFFS: usize = 32;

/// A finished resource's mark (docs/adr/0012): `holder` finished it with the permit `token` at
/// `at`, with its `result`, and it stays finished while `now < until`. Nothing sweeps it: every
/// decision compares times, and the next write after `until` drops it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    pub holder: String,
    pub token: u64,
    pub at: Millis,
    pub result: Option<String>,
    pub until: Millis,
}

/// The longest `result` a done release keeps, in UTF-8 bytes.
pub const MAX_RESULT_BYTES: usize = 1024;

/// How long a resource stays finished when `keepDoneSeconds` is omitted: a week.
pub const DEFAULT_KEEP_DONE_SECONDS: u32 = 604_800;

/// The most candidates one acquire may name (and the fewest: 2).
pub const MAX_CANDIDATES: usize = 50;

/// The most permits a resource can have at once.
pub const MAX_LIMIT: u32 = 64;

/// The most places a resource's queue keeps: each is kept in the item and rewritten by every
/// write (some 300 bytes with a long holder name), so the queue is bounded as permits are.
pub const MAX_WAITERS: usize = 64;

/// How long a place in the queue is kept after its holder's wait ends (ms): long enough to call
/// again and keep waiting, short enough that a waiter who went away blocks nobody for long.
pub const PLACE_KEPT_MS: Millis = 30_000;

/// The longest wait one call may ask for (ms): API Gateway REST's integration timeout is 29 s.
pub const MAX_WAIT_MS: Millis = 20_000;

/// The most revoked permits a resource remembers (docs/adr/0008): enough that every holder of a
/// full semaphore revoked at once learns `REVOKED`, bounded as permits are.
pub const MAX_REVOKED: usize = 64;

/// A permit an operator revoked: its holder's next renew or release is told `REVOKED`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revoked {
    pub holder: String,
    pub token: u64,
}

/// A caller waiting for a permit of the resource (docs/adr/0007). Places are served in the order
/// they were taken. The permit a place is handed, under `limit`, lasts until `until`: its holder
/// takes it for its own ttl when it next calls, or it lapses with the place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub holder: String,
    pub limit: u32,
    /// The place lapses at this time: [`PLACE_KEPT_MS`] after its holder's last wait ends.
    pub until: Millis,
    /// The call that last kept the place, when it had a requestId: the one a permit handed to
    /// the place answers.
    pub ticket: Option<Ticket>,
    /// The session that call waited in (docs/adr/0010): the place ends with it, and a permit
    /// handed to the place is that session's.
    pub session: Option<String>,
    /// The end of `session`, as read (`lease::session::resolve`; never stored): the place lapses
    /// then if that is before `until`.
    pub session_ends: Option<Millis>,
    /// The value that call asked for: the permit's when it is handed to the place.
    pub value: Option<String>,
}

impl Place {
    /// When the place lapses: at `until`, or when its session ends, if that is earlier.
    pub fn lapses_at(&self) -> Millis {
        self.session_ends
            .map_or(self.until, |end| end.min(self.until))
    }
}

/// One (tenant, resource) as stored. `last_token` is the counter: the last token ever issued
/// (0 = never acquired). `permits` are the grants kept, by token: a lease (limit 1) keeps at most
/// one, its latest grant, which stays after it lapses and is cleared by release. A semaphore
/// (`limit` > 1, docs/adr/0006) keeps one per holder, those live when it was last written.
/// `version` counts a semaphore's writes: what its read-modify-write is guarded on.
/// `waiters` is the queue, first come first; places lapsed since the last write stay in it until
/// the next one, and every rule skips them. `revoked` are the latest permits revoked (by token),
/// kept across every later write so that their holders learn why they lost them. `handed` are
/// the permits handed to a waiting call that ended before the call took them (kept likewise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseState {
    pub last_token: u64,
    /// The limit the permits were granted under: 1 for a lease.
    pub limit: u32,
    pub version: u64,
    pub permits: Vec<Permit>,
    pub waiters: Vec<Place>,
    pub revoked: Vec<Revoked>,
    pub ended_handoffs: Vec<EndedHandoff>,
    /// Its finished mark (docs/adr/0012), live or stale: only `finished` says whether it holds.
    pub done: Option<Box<Done>>,
}

impl Default for LeaseState {
    fn default() -> Self {
        Self::vacant(0)
    }
}

/// A permit that is held right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveLease<'a> {
    pub holder: &'a str,
    pub token: u64,
    pub expires_at: Millis,
}

impl LeaseState {
    /// A resource whose counter is at `last_token` and that nobody holds.
    pub fn vacant(last_token: u64) -> Self {
        Self {
            last_token,
            limit: 1,
            version: 0,
            permits: Vec::new(),
            waiters: Vec::new(),
            revoked: Vec::new(),
            ended_handoffs: Vec::new(),
            done: None,
        }
    }

    /// A lease whose latest grant, to `holder` with the token `last_token`, lasts until
    /// `expires_at`.
    pub fn granted(last_token: u64, holder: &str, expires_at: Millis) -> Self {
        Self {
            last_token,
            limit: 1,
            version: 0,
            permits: vec![Permit::new(holder, last_token, expires_at)],
            waiters: Vec::new(),
            revoked: Vec::new(),
            ended_handoffs: Vec::new(),
            done: None,
        }
    }

    /// Whether every write of it replaces it whole, guarded on its version: a semaphore, or a
    /// resource with a queue (stored as a map of permits, docs/adr/0006), or one with a permit
    /// handed to a waiting call that has not taken it (whose end must be remembered, which a
    /// lease's writes with no read could not do). Otherwise it is a lease, whose writes need no
    /// read. A finished mark, live or stale, makes it versioned too (docs/adr/0012): its writes
    /// carry the mark or drop it, which only a whole replace does.
    pub fn is_versioned(&self) -> bool {
        self.done.is_some()
            || self.limit > 1
            || !self.waiters.is_empty()
            || self.has_live_handoff()
            || self.has_session_permit()
            || self.permits.iter().any(|p| p.value.is_some())
    }

    /// Whether a permit, live or lapsed, is a session's (docs/adr/0010): its expiry is then
    /// only known through the session, and its writes replace the item whole.
    pub fn has_session_permit(&self) -> bool {
        self.permits.iter().any(|p| p.session.is_some())
    }

    /// Whether a permit or a place names a session: only a read through the sessions tells
    /// when they end (docs/adr/0010), so such a state is no view to plan on.
    pub fn names_a_session(&self) -> bool {
        self.has_session_permit() || self.waiters.iter().any(|w| w.session.is_some())
    }

    /// Whether a permit, live or lapsed, was handed to a waiting call that has not taken it.
    pub fn has_live_handoff(&self) -> bool {
        self.permits.iter().any(|p| p.handoff.is_some())
    }

    /// The grant handed to the waiting call with `ticket` (of `holder`) that ended before the
    /// call took it (one remembered, or one lapsed that no write has ended yet), while the
    /// call's record can still be replayed.
    pub fn ended_handoff_of(
        &self,
        ticket: &Ticket,
        holder: &str,
        now: Millis,
    ) -> Option<EndedHandoff> {
        let mine = |h: &Handoff| h.ticket.key == ticket.key && now < h.ticket.until;
        let remembered = self
            .ended_handoffs
            .iter()
            .find(|h| h.holder == holder && mine(&h.handoff));
        if let Some(handed) = remembered {
            return Some(handed.clone());
        }
        // A session's hand-off is not replayed (see `semaphore::replace`).
        let lapsed = self.permits.iter().find(|p| {
            p.holder == holder
                && now >= p.expires_at
                && p.session.is_none()
                && p.handoff.as_ref().is_some_and(mine)
        })?;
        Some(EndedHandoff {
            holder: lapsed.holder.clone(),
            token: lapsed.token,
            limit: self.limit,
            handoff: lapsed.handoff.clone()?,
        })
    }

    /// Whether a take needs no read at `now`: no live permit, no live place, no permit handed
    /// to a waiting call that has not taken it, and no finished mark, not even a stale one (the
    /// guard of an unseen take: a write that finds a mark is decided on a read, which drops it
    /// once it is past).
    pub fn is_free(&self, now: Millis) -> bool {
        self.live(now).is_none()
            && self.live_waiters(now).next().is_none()
            && !self.has_live_handoff()
            && self.done.is_none()
    }

    /// Its finished mark, while it holds at `now` (docs/adr/0012).
    pub fn finished(&self, now: Millis) -> Option<&Done> {
        self.done.as_deref().filter(|d| now < d.until)
    }

    /// A tag of what a watcher waits to see change (docs/adr/0011): the live permits at `now`
    /// (holder, token, value) and the counter, hashed. A renew that only moves an expiry leaves
    /// it; a grant, a release, a lapse, a hand-off or a new value changes it (the counter tells
    /// a resource freed again from one that was never taken since). A finished mark that comes
    /// or goes changes it too (docs/adr/0012).
    pub fn tag(&self, now: Millis) -> String {
        use sha2::{Digest, Sha256};
        let mut digest = Sha256::new();
        // A finished state's bytes start with "done", which no counter's do (its first byte is
        // 0: counters stay below 2^53), so an unfinished state's tag is what it was before marks.
        if let Some(done) = self.finished(now) {
            digest.update(b"done");
            digest.update(done.token.to_be_bytes());
            digest.update(done.at.to_be_bytes());
        }
        digest.update(self.last_token.to_be_bytes());
        for p in self.live_permits(now) {
            digest.update(p.token.to_be_bytes());
            for part in [Some(p.holder.as_str()), p.value.as_deref()] {
                // Length-prefixed, so that no two states hash the same bytes.
                let part = part.map(str::as_bytes);
                digest.update([u8::from(part.is_some())]);
                digest.update((part.unwrap_or_default().len() as u64).to_be_bytes());
                digest.update(part.unwrap_or_default());
            }
        }
        hex::encode(&digest.finalize()[..12])
    }

    /// The places live at `now`, in queue order.
    pub fn live_waiters(&self, now: Millis) -> impl Iterator<Item = &Place> {
        self.waiters.iter().filter(move |w| now < w.lapses_at())
    }

    /// `holder`'s place in the queue at `now`: 1 = next.
    pub fn queue_position(&self, holder: &str, now: Millis) -> Option<usize> {
        self.live_waiters(now)
            .position(|w| w.holder == holder)
            .map(|i| i + 1)
    }

    /// The permits held at `now`, by token.
    pub fn live_permits(&self, now: Millis) -> Vec<&Permit> {
        let mut live: Vec<&Permit> = self.permits.iter().filter(|p| now < p.expires_at).collect();
        live.sort_by_key(|p| p.token);
        live
    }

    /// `holder`'s permit, live at `now`.
    pub fn live_permit_of(&self, holder: &str, now: Millis) -> Option<&Permit> {
        self.permits
            .iter()
            .find(|p| p.holder == holder && now < p.expires_at)
    }

    /// Whether a permit live at `now` has `token` (and `holder`, when given): what `check` answers.
    pub fn is_current(&self, token: u64, holder: Option<&str>, now: Millis) -> bool {
        self.permits
            .iter()
            .any(|p| p.token == token && now < p.expires_at && holder.is_none_or(|h| h == p.holder))
    }

    /// Whether `holder`'s permit with `token` was revoked.
    pub fn was_revoked(&self, holder: &str, token: u64) -> bool {
        self.revoked
            .iter()
            .any(|r| r.holder == holder && r.token == token)
    }

    /// The latest grant kept, live or lapsed.
    pub fn latest(&self) -> Option<&Permit> {
        self.permits.iter().max_by_key(|p| p.token)
    }

    /// The live permit with the largest token, if someone holds the resource at `now` (held
    /// while `now < expires_at`).
    pub fn live(&self, now: Millis) -> Option<LiveLease<'_>> {
        self.permits
            .iter()
            .filter(|p| now < p.expires_at)
            .max_by_key(|p| p.token)
            .map(|p| LiveLease {
                holder: &p.holder,
                token: p.token,
                expires_at: p.expires_at,
            })
    }
}
