//! Leader election, as the contract builds it: a waiting acquire with a value (campaign), a
//! renew with a new value (proclaim: [`crate::Guard::proclaim`]), a release (resign: drop or
//! release the guard) and watches chained on the state's tag (observe).
//!
//! Unlike etcd's `Observe` (etcd#18163) the observer never reports a leader from a stale read:
//! each event is the answer of one watch, made when the server saw the permit live, and a
//! lapse is a change (a leader whose permit lapsed is followed by the next state, never shown
//! again). Each watch names the state it saw last, so no change is skipped: a change made while
//! the next watch was on its way is answered at once.

use super::{Ask, Client, Error, Guard, Lease, MAX_SERVER_WAIT};
use serde_json::json;
use std::time::Duration;

/// Who leads a resource (holds its one permit, or the live permit with the largest token of a
/// semaphore).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    pub holder: String,
    pub fencing_token: u64,
    /// The leader's value (its address, its progress), if it set one.
    pub value: Option<String>,
    /// ISO 8601 UTC, as the answer said.
    pub expires_at: Option<String>,
}

impl Leader {
    /// The leader a get or watch answer shows; `None` when nobody holds the resource.
    pub fn of(lease: &Lease) -> Option<Self> {
        Some(Self {
            holder: lease.holder.clone()?,
            fencing_token: lease.fencing_token?,
            value: lease.value.clone(),
            expires_at: lease.expires_at.clone(),
        })
    }
}

/// The leaders of a resource as they change: see [`Client::observe`].
pub struct Observer {
    client: Client,
    resource: String,
    wait: Duration,
    /// The state last reported (`None` before the first).
    tag: Option<String>,
}

impl Observer {
    /// The leader as it stands (first call), then at each change: a new leader, a new value, or
    /// nobody (`None`). Waits as long as it takes. An error (the service did not answer) leaves
    /// the observer where it was: call again, and a change made meanwhile is reported.
    pub async fn next(&mut self) -> Result<Option<Leader>, Error> {
        loop {
            let answer = self
                .client
                .watch(&self.resource, self.tag.as_deref(), self.wait)
                .await?;
            self.tag.clone_from(&answer.state_tag);
            if answer.changed == Some(true) {
                return Ok(Leader::of(&answer));
            }
        }
    }
}

/// A wait long enough to be "until elected", and short enough to add to an instant.
pub const FOREVER: Duration = Duration::from_secs(100 * 365 * 86_400);

impl Client {
    /// `resource` as soon as its state is no longer the one `state_tag` names (at once without
    /// one: `changed` true), or when `wait` (at most 20 s) has passed (`changed` false, the same
    /// tag). The answer is a get's, with `state_tag` for the next watch.
    pub async fn watch(
        &self,
        resource: &str,
        state_tag: Option<&str>,
        wait: Duration,
    ) -> Result<Lease, Error> {
        let wait = wait.min(MAX_SERVER_WAIT).as_secs();
        let mut body = json!({"op": "watch", "resource": resource, "waitSeconds": wait});
        if let Some(tag) = state_tag {
            body["stateTag"] = json!(tag);
        }
        self.call(body, None).await
    }

    /// Who leads `resource` now (`None`: nobody).
    pub async fn leader(&self, resource: &str) -> Result<Option<Leader>, Error> {
        Ok(Leader::of(&self.get(resource).await?))
    }

    /// The leaders of `resource` as they change ([`Observer::next`]), each from a watch of up
    /// to 20 s chained on the last one's tag.
    pub fn observe(&self, resource: &str) -> Observer {
        Observer {
            client: self.clone(),
            resource: resource.to_owned(),
            wait: MAX_SERVER_WAIT,
            tag: None,
        }
    }

    /// Lead `resource`: wait in its queue (up to `wait`; `None`: until elected), then hold it
    /// with `value` (your address), renewed in the background by the [`Guard`]. Proclaim a new
    /// value with [`Guard::proclaim`]; resign by releasing (or dropping) the guard;
    /// [`Guard::lost`] says when you may no longer be the leader. `Error::Held` when the wait
    /// ends first.
    pub async fn campaign(
        &self,
        resource: &str,
        holder: &str,
        value: &str,
        ttl: Duration,
        wait: Option<Duration>,
    ) -> Result<Guard, Error> {
        let ask = Ask::new(resource, holder, ttl, 1).with_value(value);
        self.guard_asked(&ask, Duration::ZERO, wait.unwrap_or(FOREVER).min(FOREVER))
            .await
    }
}
