//! A held lease that renews itself in the background, and a local deadline it never counts past.
//!
//! The server decides expiry by its own clock: a grant holds until the moment it handled the
//! request plus the TTL. The guard cannot see that clock, but it knows when it sent the request,
//! which was before the server handled it. So it keeps a local deadline on its own monotonic
//! clock: the send time of the last granted acquire or renew, plus the TTL, minus
//! [`safety_margin`]. Nothing the guard tells you (is_held, lost, expiring) counts past that
//! deadline, whatever a renewal in flight is doing, and a renewal is given only the time left.

use super::{Client, Error, Fence, Lease, release_body, renew_body};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until};

/// The part of a lease the guard does not count on: 1% of the TTL plus 250 ms (a 30 s lease is
/// counted as 29.45 s from the send time, a 3 s one as 2.72 s, a 1 s one as 0.74 s).
///
/// Why that much: the local deadline and the server's expiry are both "a TTL after an instant
/// of the same request" (send, then handling), so the clocks' offsets cancel; what is left is
/// how fast each clock runs, and when things happen on time.
/// - 1% of the TTL: rate. Quartz clocks are within 100 ppm; NTP slews a clock by at most
///   500 ppm. Our clock running slow against the server's by even the sum of both extremes
///   (0.1%) is covered ten times over.
/// - 250 ms: lateness. A timer on a loaded host fires late; the work has to be stopped by the
///   deadline (a signal delivered, a process gone); and a service with several instances judges
///   the next acquire by another instance's clock, which may run ahead of the one that granted
///   (NTP keeps servers within a few ms, AWS Time Sync within 1 ms).
pub fn safety_margin(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(250)
}

/// A held lease's times, from the send time of its last grant (see the module's notes): the
/// local deadline, and when to renew, a third of the way to `deadline - lead`, which leaves two
/// more thirds for retries. The same rule as the Python client's; `clients/deadlines.json` pins
/// both.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// What the guard counts on of a TTL: the TTL minus [`safety_margin`].
    pub usable: Duration,
    /// From the send time to the renewal.
    plan: Duration,
}

impl Timing {
    /// `None` where `lead` leaves nothing of the usable time.
    pub(crate) fn new(ttl: Duration, lead: Duration) -> Option<Self> {
        let usable = ttl.checked_sub(safety_margin(ttl))?;
        let plan = usable.checked_sub(lead).filter(|left| !left.is_zero())? / 3;
        Some(Self { usable, plan })
    }

    /// The local deadline of a grant whose request was sent at `sent`.
    pub(crate) fn deadline<T: std::ops::Add<Duration, Output = T>>(&self, sent: T) -> T {
        sent + self.usable
    }

    /// When to renew the grant whose local deadline is `deadline`.
    pub(crate) fn renew_at<T: std::ops::Sub<Duration, Output = T>>(&self, deadline: T) -> T {
        deadline - (self.usable - self.plan)
    }
}

/// Pause before trying a renewal again after a call that failed (its own retries spent).
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Why a guard's lease ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// A renewal was refused (the rule: LEASE_EXPIRED, NOT_HOLDER, TOKEN_MISMATCH, NO_HOLD, or
    /// REVOKED when an operator ended the permit).
    Refused(String),
    /// No renewal got through before the local deadline (or before `lead` of it, for
    /// [`Guard::expiring`]).
    Unreachable(String),
    /// Its owner released it (or closed the session, or dropped the guard).
    Released,
}

/// What the guard keeps alive: one lease (or permit), or a session and every permit in it.
pub(crate) enum Kept {
    /// `limit`: the semaphore's (1 for a lease), which decides how its writes are fenced.
    Lease {
        resource: String,
        token: u64,
        limit: u32,
    },
    Session {
        id: String,
    },
}

/// What the guard holds, for its renewals.
pub(crate) struct Held {
    pub kept: Kept,
    pub holder: String,
    /// As sent (whole seconds).
    pub ttl: Duration,
    /// Its deadline and renewals (planned to land a lead before the deadline).
    pub timing: Timing,
}

impl Held {
    /// What moves the deadline: a lease's renew, a session's keepalive.
    fn renewal(&self) -> Value {
        match &self.kept {
            Kept::Lease {
                resource, token, ..
            } => renew_body(resource, &self.holder, *token, self.ttl),
            Kept::Session { id } => json!({
                "op": "keepalive", "session": id, "holder": self.holder,
                "ttlSeconds": self.ttl.as_secs(),
            }),
        }
    }

    /// What ends it: a lease's release (with done, a done release: docs/adr/0012), a session's
    /// close (every permit in it).
    fn ending(&self, done: Option<&Finish>) -> Value {
        match &self.kept {
            Kept::Lease {
                resource, token, ..
            } => {
                let mut body = release_body(resource, &self.holder, *token);
                if let Some(finish) = done {
                    body["done"] = json!(true);
                    if let Some(result) = &finish.result {
                        body["result"] = json!(result);
                    }
                    if let Some(keep) = finish.keep {
                        body["keepDoneSeconds"] = json!(keep.as_secs().max(1));
                    }
                }
                body
            }
            Kept::Session { id } => json!({"op": "close", "session": id, "holder": self.holder}),
        }
    }
}

/// How a guard's owner lets it go.
pub(crate) enum Ending {
    Release,
    /// A done release (docs/adr/0012), whose answer the owner waits for.
    Done {
        finish: Finish,
        answer: oneshot::Sender<Result<Lease, Error>>,
    },
}

/// What a done release leaves: the work's result, and how long the resource stays finished
/// (the server's default, a week, when `None`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Finish {
    pub result: Option<String>,
    pub keep: Option<Duration>,
}

/// Shared by the guard and its renewer; changed only under the channel's lock, so a loss, once
/// judged, is final: a renewal that lands after it does not revive the lease.
#[derive(Debug, Clone)]
struct State {
    deadline: Instant,
    lost: Option<Lost>,
}

impl State {
    /// Record the loss if the deadline has passed; whether that changed anything.
    fn judge(&mut self, now: Instant) -> bool {
        if self.lost.is_none() && now >= self.deadline {
            self.lost = Some(Lost::Unreachable(
                "no renewal got through before the local deadline".into(),
            ));
            return true;
        }
        false
    }
}

/// A lease you hold. Renews a third of the way to its deadline (minus the lead it was made
/// with), retrying while time is left; [`Guard::lost`] resolves when a renewal is refused or, at
/// the latest, at the local deadline; [`Guard::release`] (or dropping the guard) releases it.
pub struct Guard {
    token: u64,
    /// Whose lease it is, for [`Guard::proclaim`] (`None` for a session's guard).
    owner: Option<Owner>,
    signal: Signal,
    stop: Option<oneshot::Sender<Ending>>,
    task: Option<JoinHandle<()>>,
}

impl Guard {
    /// Start renewing `held`, granted with a first local `deadline`.
    pub(crate) fn start(client: Client, held: Held, deadline: Instant) -> Self {
        let state = Arc::new(watch::Sender::new(State {
            deadline,
            lost: None,
        }));
        let signal = Signal {
            seen: state.subscribe(),
            state: state.clone(),
        };
        let (stop, stopped) = oneshot::channel();
        let (token, owner) = match &held.kept {
            Kept::Lease {
                resource,
                token,
                limit,
            } => (
                *token,
                Some(Owner {
                    client: client.clone(),
                    resource: resource.clone(),
                    holder: held.holder.clone(),
                    ttl: held.ttl,
                    limit: *limit,
                }),
            ),
            Kept::Session { .. } => (0, None),
        };
        let task = tokio::spawn(renew(client, held, state, stopped));
        Self {
            token,
            owner,
            signal,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// The fencing token of this lease: send it with every write the lease protects.
    pub fn fencing_token(&self) -> u64 {
        self.token
    }

    /// What a fenced write needs of this lease ([`crate::fencing`]): its resource, token,
    /// holder and limit, and this client to `check` a semaphore's permit with.
    pub fn fence(&self) -> Fence {
        match &self.owner {
            Some(owner) => Fence {
                resource: owner.resource.clone(),
                token: self.token,
                holder: Some(owner.holder.clone()),
                limit: owner.limit,
                client: Some(owner.client.clone()),
            },
            // A session's own guard, never handed out: it holds no token, so it fences nothing
            // (token 0 is below every token the service issues).
            None => Fence::new("", 0),
        }
    }

    /// The local deadline: the lease is yours until then at least, unless renewed.
    pub fn deadline(&self) -> std::time::Instant {
        self.signal.deadline()
    }

    /// Resolves when the lease is lost: a renewal refused, or the local deadline reached with no
    /// renewal granted (whatever a renewal in flight is doing). Never, while it is renewed.
    pub async fn lost(&mut self) -> Lost {
        self.signal.lost().await
    }

    /// Like [`Guard::lost`], but resolves already `lead` before the local deadline when no
    /// renewal has moved it by then: for work that needs `lead` to stop (make the guard with
    /// [`Client::guard_with_lead`] so renewals are planned before that).
    pub async fn expiring(&mut self, lead: Duration) -> Lost {
        self.signal.expiring(lead).await
    }

    /// The loss of this lease for other tasks: each clone resolves [`Signal::lost`] with it.
    pub fn signal(&self) -> Signal {
        self.signal.clone()
    }

    /// The local deadline each time a renewal moves it: for a second process that enforces the
    /// deadline by itself, should this one stop being scheduled (`leasekit run`'s watchdog).
    pub fn renewals(&self) -> Renewals {
        let seen = self.signal.state.subscribe();
        let last = seen.borrow().deadline;
        Renewals { seen, last }
    }

    /// Whether the lease is still held, as far as the last renewal and the local deadline know.
    pub fn is_held(&self) -> bool {
        self.signal.is_held()
    }

    /// Change the lease's value (a leader's address, progress) while you hold it: a renew with
    /// it. `Err(Error::Lost)` when the token is no longer a live permit's (someone else leads,
    /// or nobody; the guard is lost from then on), or the guard was lost already: a deposed
    /// leader cannot speak for the resource.
    pub async fn proclaim(&self, value: &str) -> Result<Lease, Error> {
        let Some(owner) = &self.owner else {
            return Err(Error::Invalid(
                "a session has no value: proclaim on a lease".into(),
            ));
        };
        if let Some(lost) = self.signal.state.borrow().lost.clone() {
            return Err(Error::Lost(lost));
        }
        let mut body = renew_body(&owner.resource, &owner.holder, self.token, owner.ttl);
        body["value"] = json!(value);
        let deadline = self.signal.state.borrow().deadline;
        let lease = owner.client.call(body, Some(deadline)).await?;
        if lease.granted {
            return Ok(lease);
        }
        let lost = Lost::Refused(refusal(&lease));
        self.signal.lose(lost.clone());
        Err(Error::Lost(lost))
    }

    /// Stop renewing and release the lease; waits for the release (at most until the deadline,
    /// after which the lease lapses by itself).
    pub async fn release(mut self) -> Result<(), Error> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(Ending::Release);
        }
        self.stopped().await
    }

    /// The work is finished: stop renewing and release the lease with done (docs/adr/0012), so
    /// that nobody is granted the resource again while the mark stands (a week unless `keep`
    /// says otherwise) and every acquire is told who finished it and `result`. The answer's
    /// `done` is the mark. `Err(Error::Lost)` when the lease was lost first (nothing marked:
    /// the work may have been fenced off), or the release was refused.
    pub async fn done(
        mut self,
        result: Option<&str>,
        keep: Option<Duration>,
    ) -> Result<Lease, Error> {
        if self.owner.is_none() {
            return Err(Error::Invalid(
                "a session is not finished: finish each lease in it".into(),
            ));
        }
        let (answer, answered) = oneshot::channel();
        let finish = Finish {
            result: result.map(str::to_owned),
            keep,
        };
        if let Some(stop) = self.stop.take() {
            // Refused when the renewer has ended already: the lease was lost, refused.
            let _ = stop.send(Ending::Done { finish, answer });
        }
        self.stopped().await?;
        let lost = || {
            let lost = self.signal.state.borrow().lost.clone();
            Error::Lost(lost.unwrap_or(Lost::Released))
        };
        let lease = answered.await.map_err(|_| lost())??;
        match lease.granted {
            true => Ok(lease),
            false => Err(Error::Lost(Lost::Refused(refusal(&lease)))),
        }
    }

    /// Waits for the renewer to end.
    async fn stopped(&mut self) -> Result<(), Error> {
        if let Some(task) = self.task.take() {
            task.await.map_err(|e| Error::Unavailable(e.to_string()))?;
        }
        Ok(())
    }
}

/// Whose lease a guard keeps.
struct Owner {
    client: Client,
    resource: String,
    holder: String,
    ttl: Duration,
    limit: u32,
}

/// The rule that refused a renewal.
fn refusal(lease: &Lease) -> String {
    lease
        .witnesses
        .first()
        .map_or("refused", |w| w.rule_id.as_str())
        .to_owned()
}

/// The loss of a guard's lease (or of a session and every hold in it), for any number of
/// tasks: clone it into each. It judges the local deadline itself, so it resolves on time even
/// while the renewer is stuck in a call; once the lease is released (or the guard dropped) it
/// resolves with [`Lost::Released`]. A loss, once judged, is final.
#[derive(Clone)]
pub struct Signal {
    state: Arc<watch::Sender<State>>,
    seen: watch::Receiver<State>,
}

impl Signal {
    /// See [`Guard::lost`].
    pub async fn lost(&mut self) -> Lost {
        self.expiring(Duration::ZERO).await
    }

    /// See [`Guard::expiring`].
    pub async fn expiring(&mut self, lead: Duration) -> Lost {
        loop {
            self.state.send_if_modified(|s| s.judge(Instant::now()));
            let (deadline, lost) = {
                let state = self.seen.borrow_and_update();
                (state.deadline, state.lost.clone())
            };
            if let Some(lost) = lost {
                return lost;
            }
            let at = deadline.checked_sub(lead).unwrap_or(deadline);
            if Instant::now() >= at {
                return Lost::Unreachable(format!(
                    "no renewal got through {lead:?} before the local deadline"
                ));
            }
            tokio::select! {
                // This signal holds a sender too, so this never ends in an error.
                _ = self.seen.changed() => {}
                () = sleep_until(at) => {}
            }
        }
    }

    /// See [`Guard::is_held`].
    pub fn is_held(&self) -> bool {
        self.state.send_if_modified(|s| s.judge(Instant::now()));
        self.state.borrow().lost.is_none()
    }

    /// See [`Guard::deadline`].
    pub fn deadline(&self) -> std::time::Instant {
        self.state.borrow().deadline.into_std()
    }

    /// Record a loss seen by another call than a renewal (an acquire in a session that has
    /// ended): every clone resolves with it, and the renewer stops at its next step.
    pub(crate) fn lose(&self, lost: Lost) {
        self.state.send_modify(|s| {
            s.lost.get_or_insert(lost);
        });
    }
}

/// See [`Guard::renewals`]; independent of the guard's borrow, so it can be awaited beside it.
pub struct Renewals {
    seen: watch::Receiver<State>,
    /// The deadline last reported (or current when made): what counts as moved.
    last: Instant,
}

impl Renewals {
    /// The new local deadline after the next granted renewal; `None` once the lease is lost
    /// (and from then on: a loss is final).
    pub async fn next(&mut self) -> Option<std::time::Instant> {
        loop {
            {
                let state = self.seen.borrow_and_update();
                if state.lost.is_some() {
                    return None;
                }
                if state.deadline != self.last {
                    self.last = state.deadline;
                    return Some(state.deadline.into_std());
                }
            }
            // The guard holds a sender: an error means it is gone, with its lease.
            self.seen.changed().await.ok()?;
        }
    }
}

impl Drop for Guard {
    /// Dropped without `release`: the background task still releases the lease.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(Ending::Release);
        }
    }
}

/// The renewer: renew until stopped (then release) or lost.
async fn renew(
    client: Client,
    held: Held,
    state: Arc<watch::Sender<State>>,
    mut stopped: oneshot::Receiver<Ending>,
) {
    let timing = held.timing;
    let mut deadline = state.borrow().deadline;
    loop {
        tokio::select! {
            ending = &mut stopped => return release(&client, &held, &state, deadline, ending).await,
            () = sleep_until(timing.renew_at(deadline)) => {}
        }
        let sent = loop {
            let sent = Instant::now();
            if sent >= deadline {
                state.send_if_modified(|s| s.judge(sent));
                return after_loss(&client, &held, &state, stopped).await;
            }
            let call = client.call(held.renewal(), Some(deadline));
            let answer = tokio::select! {
                ending = &mut stopped => return release(&client, &held, &state, deadline, ending).await,
                answer = call => answer,
            };
            match answer {
                Ok(lease) if lease.granted => break sent,
                Ok(lease) => {
                    let rule = refusal(&lease);
                    state.send_modify(|s| {
                        s.lost.get_or_insert(Lost::Refused(rule));
                    });
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "renewal failed; retrying while time is left");
                    tokio::select! {
                        ending = &mut stopped => return release(&client, &held, &state, deadline, ending).await,
                        () = sleep(RETRY_PAUSE) => {}
                    }
                }
            }
        };
        // The lease now lasts a TTL from `sent` at least; it counts only if no loss was judged.
        let mut renewed = false;
        state.send_if_modified(|s| {
            if s.judge(Instant::now()) || s.lost.is_some() {
                return true;
            }
            s.deadline = timing.deadline(sent);
            renewed = true;
            true
        });
        if !renewed {
            return after_loss(&client, &held, &state, stopped).await;
        }
        deadline = timing.deadline(sent);
    }
}

/// How long the ending call may take once the local deadline has passed.
const ENDING_GRACE: Duration = Duration::from_secs(2);

/// After a loss: unless the service refused (it has ended it already), end it all the same when
/// the owner lets go. A renewal whose answer never came may have been applied, and kept it for
/// another TTL (the attack of 2026-12-05: a session stayed live after its block was left);
/// ending what is no longer ours is refused, and changes nothing.
async fn after_loss(
    client: &Client,
    held: &Held,
    state: &watch::Sender<State>,
    stopped: oneshot::Receiver<Ending>,
) {
    let refused = matches!(state.borrow().lost, Some(Lost::Refused(_)));
    if refused {
        return;
    }
    let ending = stopped.await;
    if ending.is_err() {
        return;
    }
    release(client, held, state, Instant::now(), ending).await;
}

/// Release, giving up at the deadline, or [`ENDING_GRACE`] from now if that is later (the lease
/// lapses by itself after). The signal says so first: nothing is held from the moment the owner
/// lets go.
/// A done release's answer goes to its owner, who waits for it.
async fn release(
    client: &Client,
    held: &Held,
    state: &watch::Sender<State>,
    deadline: Instant,
    ending: Result<Ending, oneshot::error::RecvError>,
) {
    state.send_modify(|s| {
        s.lost.get_or_insert(Lost::Released);
    });
    let by = deadline.max(Instant::now() + ENDING_GRACE);
    // A sender dropped without a word is a release.
    let (finish, answer) = match ending {
        Ok(Ending::Done { finish, answer }) => (Some(finish), Some(answer)),
        Ok(Ending::Release) | Err(_) => (None, None),
    };
    let ended = client.call(held.ending(finish.as_ref()), Some(by)).await;
    // A done release refused (bad input, or a rule: finished by another meanwhile) changed
    // nothing: the lease is released all the same, not left held for its whole TTL (the attack
    // of 2026-12-06); the owner hears the refusal.
    let refused = match &ended {
        Err(Error::Refused { status: 400, .. }) => true,
        Ok(lease) => !lease.granted,
        Err(_) => false,
    };
    if finish.is_some()
        && refused
        && let Err(e) = client.call(held.ending(None), Some(by)).await
    {
        tracing::warn!(error = %e, "release failed; the lease lapses by itself");
    }
    match answer {
        Some(answer) => {
            let _ = answer.send(ended);
        }
        None => {
            if let Err(e) = ended {
                tracing::warn!(error = %e, "release failed; the lease lapses by itself");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table both clients' tests read: the same TTL and send time give the same deadline
    /// and first renewal in Rust and in Python (`clients/python/tests/test_core.py`).
    #[test]
    fn the_deadlines_are_the_shared_tables() {
        let table: serde_json::Value =
            serde_json::from_str(include_str!("../../clients/deadlines.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() >= 8, "{table}");
        let ms = |case: &serde_json::Value, name: &str| {
            Duration::from_millis(case[name].as_u64().unwrap_or_else(|| panic!("{name}")))
        };
        for case in cases {
            let ttl = Duration::from_secs(case["ttlSeconds"].as_u64().unwrap());
            let timing = Timing::new(ttl, Duration::ZERO).unwrap();
            let sent = ms(case, "sentMs");
            // Whole milliseconds, as the table keeps them (floored).
            let floor = |d: Duration| Duration::from_millis(d.as_millis() as u64);
            let deadline = timing.deadline(sent);
            assert_eq!(floor(deadline), ms(case, "deadlineMs"), "{case}");
            assert_eq!(
                floor(timing.renew_at(deadline)),
                ms(case, "renewAtMs"),
                "{case}"
            );
        }
    }

    #[test]
    fn a_lead_must_leave_some_of_the_usable_time() {
        let ttl = Duration::from_secs(30);
        let usable = ttl - safety_margin(ttl);
        assert!(Timing::new(ttl, usable - Duration::from_millis(1)).is_some());
        assert!(Timing::new(ttl, usable).is_none());
        let timing = Timing::new(ttl, Duration::from_secs(3)).unwrap();
        // A third of the way to three seconds before the deadline.
        let renew = timing.renew_at(timing.deadline(Duration::ZERO));
        assert_eq!(renew, (usable - Duration::from_secs(3)) / 3);
    }
}
