//! A client for the leasekit lease service.
//!
//! - [`Client`]: typed `acquire`, `renew`, `release`, `get`. Every mutation carries a requestId, so
//!   the retries after a lost answer or a 502 that this client makes never apply a call twice.
//! - [`Client::guard`]: acquire and keep the lease alive in the background; the [`Guard`] gives the
//!   fencing token, tells you the moment the lease is lost ([`Guard::lost`]: at the latest at a
//!   local deadline that comes before the server can give the lease to anyone else), and releases
//!   it on [`Guard::release`] or when dropped.
//!
//! - Finished work ([`Guard::done`]) and a work queue ([`Client::claim_next`]): finish a held
//!   task with its result, so nobody is handed it again ([`Error::Finished`] says who did it);
//!   take the first free task of a list:
//!
//! ```no_run
//! # async fn work(client: leasekit_client::Client, tasks: &[&str]) -> Result<(), leasekit_client::Error> {
//! use leasekit_client::Claim;
//! use std::time::Duration;
//! loop {
//!     match client.claim_next(tasks, "agent-1", Duration::from_secs(300)).await? {
//!         Claim::Won { resource, guard } => {
//!             let result = format!("{resource} done under token {}", guard.fencing_token());
//!             guard.done(Some(&result), None).await?; // Err(Error::Lost(..)): nothing marked
//!         }
//!         Claim::NoneFree { busy, .. } if busy.is_empty() => return Ok(()), // all finished
//!         Claim::NoneFree { .. } => tokio::time::sleep(Duration::from_secs(1)).await,
//!     }
//! }
//! # }
//! ```
//!
//! Pay per call with x402 by giving a [`PayFn`] that turns the service's 402 offer into a
//! `PAYMENT-SIGNATURE` header value, or use an API key.

mod answers;
mod bodies;
mod claim;
mod election;
pub mod fencing;
pub mod guard;
mod retry;
mod send;
mod session;
pub use leasekit_json_http as http;

pub use answers::{
    AuditEntry, AuditPage, Done, Lease, ListPage, Listed, Member, Permit, SessionPermit,
    SessionState, Waiter, Witness,
};
pub use bodies::Ask;
pub(crate) use bodies::{acquire_body, page_body, release_body, renew_body, set_leases, wire_ttl};
pub use claim::Claim;
pub use election::{FOREVER, Leader, Observer};
pub use fencing::{Fence, FenceError};
pub use guard::{Guard, Lost, Renewals, Signal, safety_margin};
pub use session::Session;

use http::JsonHttp;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Turns the service's x402 `PaymentRequired` (the 402 body) into a `PAYMENT-SIGNATURE` value.
pub type PayFn = Arc<dyn Fn(&Value) -> Result<String, String> + Send + Sync>;

#[derive(Clone)]
enum Auth {
    ApiKey { key: String, tenant: String },
    Pay(PayFn),
}

/// The ops that only read: no requestId (nothing is recorded), and a retry is harmless. The
/// server's op table (`leasekit_core::lease::ops`) says the same; a test holds the two together.
pub const READ_OPS: [&str; 5] = ["get", "check", "list", "audit", "watch"];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The service refused the request (4xx), with its code and sentence.
    #[error("{status} {code}: {message}")]
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    /// No answer after the retries (network, timeout, 502).
    #[error("the service did not answer: {0}")]
    Unavailable(String),
    /// The payment callback could not pay.
    #[error("payment: {0}")]
    Payment(String),
    /// The lease is held by someone else (from [`Client::guard`]).
    #[error("held by {holder} until {expires_at}")]
    Held { holder: String, expires_at: String },
    /// No random requestId could be made, so nothing was sent: a constant id would make one
    /// call's retry replay another call's answer.
    #[error("no random source for the requestId: {0}")]
    Random(String),
    /// An argument this client refuses before sending anything, or a limit of the service
    /// that asking again will not change (a full session).
    #[error("{0}")]
    Invalid(String),
    /// The resource is finished (a done release, docs/adr/0012): who finished it, and what the
    /// work produced. Nobody is granted it until the mark ends or someone reopens it.
    #[error("finished by {} with token {}", .0.holder, .0.fencing_token)]
    Finished(Box<Done>),
    /// The session this call worked in is lost, and every hold in it (from [`Session`]).
    #[error("the session is lost: {0:?}")]
    Lost(Lost),
}

/// How long one attempt waits for its answer (plus the wait it asked the server for).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest wait one call asks the server for (its `waitSeconds` bound).
pub const MAX_SERVER_WAIT: Duration = Duration::from_secs(20);

#[derive(Clone)]
pub struct Client {
    http: JsonHttp,
    url: String,
    auth: Auth,
}

fn request_id() -> Result<String, Error> {
    request_id_from(getrandom::fill)
}

/// A requestId from 12 bytes of `fill`; an error, never a fixed id, when `fill` fails.
fn request_id_from<E: std::fmt::Display>(
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
) -> Result<String, Error> {
    let mut bytes = [0u8; 12];
    fill(&mut bytes).map_err(|e| Error::Random(e.to_string()))?;
    Ok(format!("lk-{}", hex::encode(bytes)))
}

impl Client {
    /// A client of the service at `base_url` with an API key and a tenant id in its account.
    pub fn with_api_key(base_url: &str, key: &str, tenant: &str) -> Result<Self, Error> {
        Self::new(
            base_url,
            Auth::ApiKey {
                key: key.into(),
                tenant: tenant.into(),
            },
        )
    }

    /// A client that pays each call over x402 with `pay`.
    pub fn with_payments(base_url: &str, pay: PayFn) -> Result<Self, Error> {
        Self::new(base_url, Auth::Pay(pay))
    }

    fn new(base_url: &str, auth: Auth) -> Result<Self, Error> {
        let http = JsonHttp::new(CALL_TIMEOUT).map_err(|e| Error::Unavailable(e.0))?;
        Ok(Self {
            http,
            url: format!("{}/api/v1/lease", base_url.trim_end_matches('/')),
            auth,
        })
    }

    pub async fn acquire(
        &self,
        resource: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease, Error> {
        self.acquire_permit(resource, holder, ttl, 1).await
    }

    /// One of `limit` permits of `resource` (a semaphore; 1 is a lease), a token each.
    pub async fn acquire_permit(
        &self,
        resource: &str,
        holder: &str,
        ttl: Duration,
        limit: u32,
    ) -> Result<Lease, Error> {
        self.call(acquire_body(resource, holder, ttl, limit), None)
            .await
    }

    /// One of `limit` permits of `resource`, waiting up to `wait` for it in the resource's queue
    /// (the server's fair wait: first come, first served, answered as soon as it is yours).
    /// Waits longer than one call's 20 s are made of several calls, the place kept between
    /// them. The answer is the last call's: granted, or not with its `queue_position`.
    /// `Error::Refused` naming waitSeconds from a server that does not wait.
    pub async fn acquire_waiting(
        &self,
        resource: &str,
        holder: &str,
        ttl: Duration,
        limit: u32,
        wait: Duration,
    ) -> Result<Lease, Error> {
        self.waiting(&Ask::new(resource, holder, ttl, limit), wait)
            .await
    }

    async fn waiting(&self, ask: &Ask<'_>, wait: Duration) -> Result<Lease, Error> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut body = ask.body();
            body["waitSeconds"] = json!(left.min(MAX_SERVER_WAIT).as_secs());
            let lease = self.call(body, None).await?;
            if lease.granted || lease.queue_position.is_none() || left < Duration::from_secs(1) {
                return Ok(lease);
            }
        }
    }

    /// Every one of `resources` (2..50) or none: the answer's `leases` has each one's token.
    pub async fn acquire_all(
        &self,
        resources: &[&str],
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease, Error> {
        let body = json!({"op": "acquire", "resources": resources, "holder": holder, "ttlSeconds": wire_ttl(ttl).as_secs()});
        self.call(body, None).await
    }

    /// Renew a whole set, each `(resource, token)`: all or none.
    pub async fn renew_all(
        &self,
        leases: &[(&str, u64)],
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease, Error> {
        let body = json!({"op": "renew", "leases": set_leases(leases), "holder": holder, "ttlSeconds": wire_ttl(ttl).as_secs()});
        self.call(body, None).await
    }

    /// Release a whole set, each `(resource, token)`: all or none.
    pub async fn release_all(&self, leases: &[(&str, u64)], holder: &str) -> Result<Lease, Error> {
        let body = json!({"op": "release", "leases": set_leases(leases), "holder": holder});
        self.call(body, None).await
    }

    /// Whether `token` (of `holder`, if given) is a live permit of `resource`: `current`.
    pub async fn check(
        &self,
        resource: &str,
        token: u64,
        holder: Option<&str>,
    ) -> Result<Lease, Error> {
        let mut body = json!({"op": "check", "resource": resource, "token": token});
        if let Some(holder) = holder {
            body["holder"] = json!(holder);
        }
        self.call(body, None).await
    }

    pub async fn renew(
        &self,
        resource: &str,
        holder: &str,
        token: u64,
        ttl: Duration,
    ) -> Result<Lease, Error> {
        self.call(renew_body(resource, holder, token, ttl), None)
            .await
    }

    pub async fn release(&self, resource: &str, holder: &str, token: u64) -> Result<Lease, Error> {
        self.call(release_body(resource, holder, token), None).await
    }

    pub async fn get(&self, resource: &str) -> Result<Lease, Error> {
        self.call(json!({"op": "get", "resource": resource}), None)
            .await
    }

    /// Acquire `resource` and keep it: see [`Guard`]. `Error::Held` when someone else holds it.
    pub async fn guard(&self, resource: &str, holder: &str, ttl: Duration) -> Result<Guard, Error> {
        self.guard_with_lead(resource, holder, ttl, Duration::ZERO)
            .await
    }

    /// [`Client::guard`] for work that needs `lead` to stop: renewals are planned to land before
    /// `deadline - lead`, which is when [`Guard::expiring`]`(lead)` resolves without one.
    /// `Error::Invalid` unless `lead` is less than the usable lease time (TTL minus
    /// [`safety_margin`]).
    ///
    /// The first deadline counts from the instant just before the acquire's first attempt was
    /// sent. Which attempt the server applied cannot be told for sure (a retry is answered from
    /// the stored answer of an earlier one, and an attempt given up on may still arrive), but
    /// each was sent after that instant, so the lease lasts at least a TTL from it. The acquire
    /// gives up at that first deadline: a grant arriving later would be worth nothing (the
    /// server's lease then lapses by itself).
    pub async fn guard_with_lead(
        &self,
        resource: &str,
        holder: &str,
        ttl: Duration,
        lead: Duration,
    ) -> Result<Guard, Error> {
        self.guard_permit(resource, holder, ttl, lead, 1).await
    }

    /// [`Client::guard_with_lead`] for one of `limit` permits of a semaphore.
    pub async fn guard_permit(
        &self,
        resource: &str,
        holder: &str,
        ttl: Duration,
        lead: Duration,
        limit: u32,
    ) -> Result<Guard, Error> {
        self.guarded(&Ask::new(resource, holder, ttl, limit), lead)
            .await
    }

    async fn guarded(&self, ask: &Ask<'_>, lead: Duration) -> Result<Guard, Error> {
        let &Ask {
            resource,
            holder,
            ttl,
            limit,
            ..
        } = ask;
        let Some(timing) = guard::Timing::new(ttl, lead) else {
            let usable = ttl.saturating_sub(safety_margin(ttl));
            return Err(Error::Invalid(format!(
                "a lead of {lead:?} leaves nothing of a {ttl:?} lease ({usable:?} usable after the safety margin)"
            )));
        };
        let sent = Instant::now();
        let lease = self.call(ask.body(), Some(timing.deadline(sent))).await?;
        // Finished: nobody is granted it while the mark stands, waiting will not help.
        if let (false, Some(done)) = (lease.granted, &lease.done) {
            return Err(Error::Finished(Box::new(done.clone())));
        }
        match (lease.granted, lease.fencing_token) {
            // Whichever attempt the server applied, it handled it after `sent`.
            (true, Some(token)) => Ok(Guard::start(
                self.clone(),
                guard::Held {
                    kept: guard::Kept::Lease {
                        resource: resource.to_owned(),
                        token,
                        limit: lease.limit,
                    },
                    holder: holder.to_owned(),
                    ttl,
                    timing,
                },
                timing.deadline(sent),
            )),
            // Waiting would not help: the live permits were granted under another limit.
            _ if lease
                .witnesses
                .iter()
                .any(|w| w.rule_id == "LIMIT_MISMATCH") =>
            {
                Err(Error::Invalid(format!(
                    "{resource} is held under limit {}, not {limit}",
                    lease.limit
                )))
            }
            _ => Err(Error::Held {
                holder: lease.holder.unwrap_or_default(),
                expires_at: lease.expires_at.unwrap_or_default(),
            }),
        }
    }

    /// [`Client::guard_permit`], waiting up to `wait` for the permit in the resource's queue
    /// ([`Client::acquire_waiting`]) when someone else holds it: `Error::Held` if the wait ends
    /// first. Once the server has granted it, the guard is started by one more acquire (the
    /// holder's own, the same token), so that its deadlines count from a send made after the
    /// grant, however long the wait took. A server that does not wait is asked again with
    /// backoff instead.
    pub async fn guard_waiting(
        &self,
        resource: &str,
        holder: &str,
        ttl: Duration,
        lead: Duration,
        limit: u32,
        wait: Duration,
    ) -> Result<Guard, Error> {
        self.guard_asked(&Ask::new(resource, holder, ttl, limit), lead, wait)
            .await
    }

    /// [`Client::guard_waiting`] for what `ask` says (a value with the permit).
    pub async fn guard_asked(
        &self,
        ask: &Ask<'_>,
        lead: Duration,
        wait: Duration,
    ) -> Result<Guard, Error> {
        let deadline = Instant::now() + wait;
        let mut server_waits = true;
        let mut backoff = Duration::from_millis(100);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if server_waits && left >= Duration::from_secs(1) {
                match self.waiting(ask, left).await {
                    Ok(_) => {}
                    Err(Error::Refused {
                        status: 400,
                        message,
                        ..
                    }) if message.contains("waitSeconds") => server_waits = false,
                    Err(e) => return Err(e),
                }
            }
            match self.guarded(ask, lead).await {
                Err(Error::Held { .. }) if Instant::now() < deadline => {
                    if !server_waits {
                        let left = deadline.saturating_duration_since(Instant::now());
                        tokio::time::sleep(backoff.min(left)).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                    }
                }
                done => return done,
            }
        }
    }

    /// One call and its `data` as a lease; with `by`, it gives up then.
    pub(crate) async fn call(&self, body: Value, by: Option<Instant>) -> Result<Lease, Error> {
        self.call_for(body, by).await
    }

    /// One call and its `data` as `T`.
    async fn call_for<T: serde::de::DeserializeOwned>(
        &self,
        body: Value,
        by: Option<Instant>,
    ) -> Result<T, Error> {
        let answer = self.send_by(body, by).await?;
        serde_json::from_value(answer["data"].clone())
            .map_err(|e| Error::Unavailable(format!("unexpected answer: {e}")))
    }

    /// A page of your tenant's live leases (advisory: a grant shows within about 2 s; `get`
    /// and `check` decide): those starting with `prefix`, from `cursor` (a page's
    /// `next_cursor`), at most `page_size` (1-100; default 50).
    pub async fn list(
        &self,
        prefix: Option<&str>,
        cursor: Option<&str>,
        page_size: Option<u32>,
    ) -> Result<ListPage, Error> {
        let body = page_body("list", &[("prefix", prefix), ("cursor", cursor)], page_size);
        self.call_for(body, None).await
    }

    /// End `holder`'s permit of `resource` (only the one with `token`, when given; every
    /// permit when neither is given) with `reason`, audited: an API key with the admin role, or
    /// a paying wallet in its own tenant. `revoked` lists what it ended; not granted (NO_HOLD)
    /// when nothing matching was live.
    pub async fn revoke(
        &self,
        resource: &str,
        holder: Option<&str>,
        token: Option<u64>,
        reason: &str,
    ) -> Result<Lease, Error> {
        let mut body = json!({"op": "revoke", "resource": resource, "reason": reason});
        if let Some(holder) = holder {
            body["holder"] = json!(holder);
        }
        if let Some(token) = token {
            body["token"] = json!(token);
        }
        self.call(body, None).await
    }

    /// End session `session` and every permit in it with `reason`, audited (the callers
    /// [`Client::revoke`] allows). `revoked` lists the permits it ended; not granted
    /// (SESSION_EXPIRED) when the session had ended already.
    pub async fn revoke_session(&self, session: &str, reason: &str) -> Result<Lease, Error> {
        let body = json!({"op": "revoke", "session": session, "reason": reason});
        self.call(body, None).await
    }

    /// A page of the revoke audit, newest first: of `resource` when given.
    pub async fn audit(
        &self,
        resource: Option<&str>,
        cursor: Option<&str>,
        page_size: Option<u32>,
    ) -> Result<AuditPage, Error> {
        let body = page_body(
            "audit",
            &[("resource", resource), ("cursor", cursor)],
            page_size,
        );
        self.call_for(body, None).await
    }
}

fn refused(status: u16, body: &Value) -> Error {
    Error::Refused {
        status,
        code: body["code"].as_str().unwrap_or("?").to_owned(),
        message: body["error"].as_str().unwrap_or("").to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_random_source_is_an_error_not_a_fixed_id() {
        let failed = request_id_from(|_: &mut [u8]| Err("entropy source unavailable"));
        assert!(
            matches!(&failed, Err(Error::Random(e)) if e.contains("entropy source unavailable")),
            "{failed:?}"
        );
        let a = request_id().unwrap();
        let b = request_id().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), "lk-".len() + 24);
    }
}
