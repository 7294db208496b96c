//! The bodies of the requests this client sends, built in one place.

use serde_json::{Value, json};
use std::time::Duration;

/// The TTL as sent (whole seconds, at least 1): the lease the server grants lasts this long.
pub(crate) fn wire_ttl(ttl: Duration) -> Duration {
    Duration::from_secs(ttl.as_secs().max(1))
}

/// One acquire, as guards and waits send it (again and again, the same): for
/// [`crate::Client::guard_asked`]. `Ask::new(resource, holder, ttl, limit).with_value(v)`.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub(crate) resource: &'a str,
    pub(crate) holder: &'a str,
    /// As sent (whole seconds).
    pub(crate) ttl: Duration,
    pub(crate) limit: u32,
    /// The permit's value (a campaign's), if any.
    pub(crate) value: Option<&'a str>,
}

impl<'a> Ask<'a> {
    /// `limit` permits (1: a lease) of `resource` for `holder`, each for `ttl` (whole seconds,
    /// at least 1).
    pub fn new(resource: &'a str, holder: &'a str, ttl: Duration, limit: u32) -> Self {
        Self {
            resource,
            holder,
            ttl: wire_ttl(ttl),
            limit,
            value: None,
        }
    }

    /// The permit with `value` (its holder's note: a leader's address, progress).
    pub fn with_value(self, value: &'a str) -> Self {
        Self {
            value: Some(value),
            ..self
        }
    }

    pub(crate) fn body(&self) -> Value {
        let mut body = acquire_body(self.resource, self.holder, self.ttl, self.limit);
        if let Some(value) = self.value {
            body["value"] = json!(value);
        }
        body
    }
}

pub(crate) fn acquire_body(resource: &str, holder: &str, ttl: Duration, limit: u32) -> Value {
    json!({"op": "acquire", "resource": resource, "holder": holder, "ttlSeconds": wire_ttl(ttl).as_secs(), "limit": limit})
}

pub(crate) fn renew_body(resource: &str, holder: &str, token: u64, ttl: Duration) -> Value {
    json!({"op": "renew", "resource": resource, "holder": holder, "token": token, "ttlSeconds": wire_ttl(ttl).as_secs()})
}

pub(crate) fn release_body(resource: &str, holder: &str, token: u64) -> Value {
    json!({"op": "release", "resource": resource, "holder": holder, "token": token})
}

/// A set's `leases` as sent.
pub(crate) fn set_leases(leases: &[(&str, u64)]) -> Vec<Value> {
    leases
        .iter()
        .map(|(resource, token)| json!({"resource": resource, "token": token}))
        .collect()
}

/// A list or audit request: `op` with the fields given.
pub(crate) fn page_body(
    op: &str,
    fields: &[(&str, Option<&str>)],
    page_size: Option<u32>,
) -> Value {
    let mut body = json!({"op": op});
    for (name, value) in fields {
        if let Some(value) = value {
            body[*name] = json!(value);
        }
    }
    if let Some(size) = page_size {
        body["pageSize"] = json!(size);
    }
    body
}
