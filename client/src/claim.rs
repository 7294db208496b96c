//! Finished work and claim-next (docs/adr/0012): take the first free task of a list, finish it
//! with its result ([`Guard::done`]), and reopen one that must be done again.

use crate::answers::{Done, Lease};
use crate::bodies::wire_ttl;
use crate::guard::{self, Guard, Held, Kept, safety_margin};
use crate::{Client, Error};
use serde_json::json;
use std::time::Duration;
use tokio::time::Instant;

/// What [`Client::claim_next`] got.
pub enum Claim {
    /// The first of the candidates that could be granted: its name and the guard that keeps it.
    Won { resource: String, guard: Box<Guard> },
    /// None could be granted now: those finished (each with its mark), and those held or
    /// waited for (try again later, or wait on one of them).
    NoneFree {
        finished: Vec<(String, Done)>,
        busy: Vec<String>,
    },
}

impl Client {
    /// The first of `candidates` (2..50 distinct names, tried in the order given) that can be
    /// granted now, held by a [`Guard`] as [`Client::guard`]'s is: not held to its limit, not
    /// finished, nobody waiting ahead. One snapshot of them all and one write, on the server.
    pub async fn claim_next(
        &self,
        candidates: &[&str],
        holder: &str,
        ttl: Duration,
    ) -> Result<Claim, Error> {
        let ttl = wire_ttl(ttl);
        let Some(timing) = guard::Timing::new(ttl, Duration::ZERO) else {
            return Err(Error::Invalid(format!(
                "a {ttl:?} lease leaves nothing after the safety margin ({:?})",
                safety_margin(ttl)
            )));
        };
        let body = json!({"op": "acquire", "candidates": candidates, "holder": holder, "ttlSeconds": ttl.as_secs()});
        let sent = Instant::now();
        let lease = self.call(body, Some(timing.deadline(sent))).await?;
        match (lease.granted, lease.fencing_token, lease.resource.clone()) {
            (true, Some(token), Some(resource)) => Ok(Claim::Won {
                guard: Box::new(Guard::start(
                    self.clone(),
                    Held {
                        kept: Kept::Lease {
                            resource: resource.clone(),
                            token,
                            limit: lease.limit,
                        },
                        holder: holder.to_owned(),
                        ttl,
                        timing,
                    },
                    timing.deadline(sent),
                )),
                resource,
            }),
            _ => Ok(none_free(&lease)),
        }
    }

    /// End `resource`'s finished mark early, with `reason` kept in the audit: as its
    /// `finisher` (the holder and the token it finished with) or, naming none, with an admin
    /// key or the paying wallet. `Error::Refused` 403 for anyone else.
    pub async fn reopen(
        &self,
        resource: &str,
        reason: &str,
        finisher: Option<(&str, u64)>,
    ) -> Result<Lease, Error> {
        let mut body = json!({"op": "reopen", "resource": resource, "reason": reason});
        if let Some((holder, token)) = finisher {
            body["holder"] = json!(holder);
            body["token"] = json!(token);
        }
        self.call(body, None).await
    }
}

/// The candidates of a refused claim, as its `leases` list them.
fn none_free(lease: &Lease) -> Claim {
    let (mut finished, mut busy) = (Vec::new(), Vec::new());
    for member in lease.leases.iter().flatten() {
        match &member.done {
            Some(done) => finished.push((member.resource.clone(), done.clone())),
            None => busy.push(member.resource.clone()),
        }
    }
    Claim::NoneFree { finished, busy }
}
