//! A session: one heartbeat for any number of holds, and one signal for the loss of all of them.
//!
//! [`Client::session`] opens it and starts a keepalive in the background on the guard's rule
//! (the local deadline counts from the send time of the last granted open or keepalive; see
//! [`crate::guard`]). Every permit acquired in it lives exactly as long as the session on the
//! server, so the session's local deadline is each hold's: one [`Signal`] says when all of them
//! may be someone else's. [`Session::close`] (or dropping it) ends the session and every permit
//! in it in one call.

use super::{Client, Error, Lease, Member, acquire_body};
use crate::guard::{self, Guard, Lost, Signal};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::time::Instant;

/// A session you hold: see the module's notes.
pub struct Session {
    id: String,
    holder: String,
    client: Client,
    guard: Guard,
}

impl Client {
    /// Open a session for `holder` that lapses `ttl` (1 s to 1 h, whole seconds) after its last
    /// keepalive, and keep it alive until it is closed or dropped.
    pub async fn session(&self, holder: &str, ttl: Duration) -> Result<Session, Error> {
        let ttl = super::wire_ttl(ttl);
        let Some(timing) = guard::Timing::new(ttl, Duration::ZERO) else {
            return Err(Error::Invalid(format!(
                "a {ttl:?} session leaves nothing usable"
            )));
        };
        let sent = Instant::now();
        let body = json!({"op": "open", "holder": holder, "ttlSeconds": ttl.as_secs()});
        let answer = self.call(body, Some(timing.deadline(sent))).await?;
        let Some(id) = answer.session.map(|s| s.id) else {
            return Err(Error::Unavailable("open answered no session".into()));
        };
        let held = guard::Held {
            kept: guard::Kept::Session { id: id.clone() },
            holder: holder.to_owned(),
            ttl,
            timing,
        };
        Ok(Session {
            guard: Guard::start(self.clone(), held, timing.deadline(sent)),
            id,
            holder: holder.to_owned(),
            client: self.clone(),
        })
    }
}

impl Session {
    /// The session's id, as the service knows it (`leasekit session get`, the console).
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Acquire `resource` in the session: its fencing token. `Error::Held` when someone else
    /// holds it; `Error::Lost` when the session is (then every hold in it is).
    pub async fn acquire(&self, resource: &str) -> Result<u64, Error> {
        self.acquire_permit(resource, 1).await
    }

    /// One of `limit` permits of `resource` (a semaphore), in the session: its token.
    pub async fn acquire_permit(&self, resource: &str, limit: u32) -> Result<u64, Error> {
        let answer = self.send(self.acquire_body(resource, limit)).await?;
        self.token_of(resource, answer)
    }

    /// [`Session::acquire_permit`], waiting up to `wait` in the resource's queue (first come,
    /// first served) when it is taken: `Error::Held` if the wait ends first.
    pub async fn acquire_waiting(
        &self,
        resource: &str,
        limit: u32,
        wait: Duration,
    ) -> Result<u64, Error> {
        let give_up = Instant::now() + wait;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            let mut body = self.acquire_body(resource, limit);
            let server_wait = left.min(super::MAX_SERVER_WAIT).as_secs();
            if server_wait > 0 {
                body["waitSeconds"] = json!(server_wait);
            }
            let answer = self.send(body).await?;
            let left = give_up.saturating_duration_since(Instant::now());
            if answer.granted || left.is_zero() || !holding(&answer) {
                return self.token_of(resource, answer);
            }
            // After a wait on the service (which kept the place) ask again at once; after a
            // try that could not wait (under a second left), a little later.
            if server_wait == 0 {
                tokio::time::sleep(ACQUIRE_PAUSE.min(left)).await;
            }
        }
    }

    /// Every one of `resources` (2-50) or none, in the session: each one's token, in order.
    pub async fn acquire_all(&self, resources: &[&str]) -> Result<Vec<u64>, Error> {
        let body = json!({"op": "acquire", "resources": resources, "holder": self.holder, "session": self.id});
        let answer = self.send(body).await?;
        let members = answer.leases.clone().unwrap_or_default();
        if !answer.granted {
            let taken = members.iter().find(|m: &&Member| !m.granted);
            return Err(self.refusal(&answer, taken.and_then(|m| m.holder.clone())));
        }
        Ok(members.iter().filter_map(|m| m.fencing_token).collect())
    }

    /// Give back one permit before the session ends (the others stay).
    pub async fn release(&self, resource: &str, token: u64) -> Result<Lease, Error> {
        self.client.release(resource, &self.holder, token).await
    }

    /// The session as the service has it now (its live permits in `leases`); `None` once it
    /// has ended.
    pub async fn get(&self) -> Result<Option<crate::SessionState>, Error> {
        let answer = self
            .client
            .call(json!({"op": "get", "session": self.id}), None)
            .await?;
        Ok(answer.session)
    }

    /// The loss of the session, and so of every hold in it, for any number of tasks.
    pub fn signal(&self) -> Signal {
        self.guard.signal()
    }

    /// Resolves when the session is lost: a keepalive refused, or its local deadline reached.
    pub async fn lost(&mut self) -> Lost {
        self.guard.lost().await
    }

    /// Whether the session (and each hold in it) is still held, as far as the local deadline
    /// and the last keepalive know.
    pub fn is_held(&self) -> bool {
        self.guard.is_held()
    }

    /// The local deadline of the session and every hold in it, unless kept alive.
    pub fn deadline(&self) -> std::time::Instant {
        self.guard.deadline()
    }

    /// Stop the keepalives and close the session: every permit in it ends now, its waiters
    /// served. Dropping the session does the same in the background.
    pub async fn close(self) -> Result<(), Error> {
        self.guard.release().await
    }

    fn acquire_body(&self, resource: &str, limit: u32) -> Value {
        let mut body = acquire_body(resource, &self.holder, Duration::ZERO, limit);
        body.as_object_mut().map(|b| b.remove("ttlSeconds"));
        body["session"] = json!(self.id);
        body
    }

    /// One call in the session, not sent once the session is lost (its grant would be worth
    /// nothing), and given up at the session's local deadline.
    async fn send(&self, body: Value) -> Result<Lease, Error> {
        let signal = self.guard.signal();
        if !signal.is_held() {
            return Err(Error::Lost(lost_now(signal).await));
        }
        let by = Instant::from_std(signal.deadline());
        // A waiting call may outlast the deadline: a keepalive moves it meanwhile.
        let by = body.get("waitSeconds").is_none().then_some(by);
        self.client.call(body, by).await
    }

    /// The token a single acquire was granted, or why not.
    fn token_of(&self, resource: &str, answer: Lease) -> Result<u64, Error> {
        match (answer.granted, answer.fencing_token) {
            (true, Some(token)) if self.is_held() => Ok(token),
            (true, Some(_)) => Err(Error::Lost(Lost::Unreachable(format!(
                "{resource} was granted after the session's local deadline"
            )))),
            _ => Err(self.refusal(&answer, answer.holder.clone())),
        }
    }

    /// The error of an acquire that was not granted: the session's end is the loss of every
    /// hold in it (the one signal says so at once), a full session or another limit is the
    /// caller's, anything else is someone else holding it.
    fn refusal(&self, answer: &Lease, holder: Option<String>) -> Error {
        let rule = answer.witnesses.first().map(|w| w.rule_id.as_str());
        match rule {
            Some(rule @ ("SESSION_EXPIRED" | "NOT_HOLDER")) => {
                let lost = Lost::Refused(rule.to_owned());
                self.guard.signal().lose(lost.clone());
                Error::Lost(lost)
            }
            Some("SESSION_FULL") => Error::Invalid(format!(
                "session {} holds as many permits as a session may (256)",
                self.id
            )),
            Some("LIMIT_MISMATCH") => Error::Invalid(format!(
                "held under limit {}, not the one asked",
                answer.limit
            )),
            _ => Error::Held {
                holder: holder.unwrap_or_default(),
                expires_at: answer.expires_at.clone().unwrap_or_default(),
            },
        }
    }
}

/// Pause between tries to acquire while a wait has less than a second left.
const ACQUIRE_PAUSE: Duration = Duration::from_millis(200);

/// Whether a refused acquire was refused because others hold the resource (asking again may
/// get it), not because of the session or the request.
fn holding(answer: &Lease) -> bool {
    const NOT_OTHERS: [&str; 4] = [
        "SESSION_EXPIRED",
        "NOT_HOLDER",
        "SESSION_FULL",
        "LIMIT_MISMATCH",
    ];
    !answer
        .witnesses
        .iter()
        .any(|w| NOT_OTHERS.contains(&w.rule_id.as_str()))
}

/// The loss a signal already records.
async fn lost_now(mut signal: Signal) -> Lost {
    signal.lost().await
}
