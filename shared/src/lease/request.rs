//! A lease request after validation: the typed input the rules work on.

mod shape;

pub use super::ops::Op;
pub use crate::lease::model::MAX_RESULT_BYTES;
use crate::lease::model::{DEFAULT_KEEP_DONE_SECONDS, Ticket};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Names the input schema in `shared/schemas/lease-input.json`; bump it when that file changes.
pub const INPUT_SCHEMA_VERSION: &str = "lease-input/1";

/// The longest `value`, in UTF-8 bytes (the schema bounds its characters; this its bytes).
pub const MAX_VALUE_BYTES: usize = 1024;

/// How long a watch waits for a change when `waitSeconds` is omitted.
pub const DEFAULT_WATCH_SECONDS: u32 = 20;

/// Default lease length when `ttlSeconds` is omitted.
pub const DEFAULT_TTL_SECONDS: u32 = 30;

/// The default page of `list` and `audit`.
pub const DEFAULT_PAGE_SIZE: u32 = 50;

/// The request body, deserialized only after it passed the JSON schema, so every field here is
/// already within its bounds and the op-dependent fields are present.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseRequest {
    pub op: Op,
    /// One resource; or, for a set, `resources` (acquire) or `leases` (renew, release).
    pub resource: Option<String>,
    pub resources: Option<Vec<String>>,
    pub leases: Option<Vec<SetLease>>,
    /// acquire, instead of `resource`: the first of them that can be granted now (docs/adr/0012).
    pub candidates: Option<Vec<String>>,
    pub holder: Option<String>,
    pub ttl_seconds: Option<u32>,
    /// A session's id: the one open, keepalive and close work on; an acquire's permit lives in
    /// it; get and revoke read or end it instead of a resource (docs/adr/0010).
    pub session: Option<String>,
    pub token: Option<u64>,
    pub limit: Option<u32>,
    /// How long an acquire waits in the queue for a permit (s); not part of its identity.
    pub wait_seconds: Option<u32>,
    /// list: only resources whose names start with it.
    pub prefix: Option<String>,
    /// list, audit: where the previous page ended (opaque, bound to the tenant).
    pub cursor: Option<String>,
    /// list, audit: at most this many entries (1..100); a list page also ends before its
    /// entries pass `service::lease::LIST_PAGE_BYTES`.
    pub page_size: Option<u32>,
    /// revoke: why, for the audit entry.
    pub reason: Option<String>,
    /// acquire, renew: the holder's note, kept with its permit (0..[`MAX_VALUE_BYTES`] bytes).
    pub value: Option<String>,
    /// watch: the `stateTag` the caller saw last.
    pub state_tag: Option<String>,
    /// release: the resource is finished after it (docs/adr/0012).
    pub done: Option<bool>,
    /// release with done: what the work produced (0..[`MAX_RESULT_BYTES`] bytes).
    pub result: Option<String>,
    /// release with done: how long the resource stays finished (s).
    pub keep_done_seconds: Option<u32>,
    pub tenant_id: Option<String>,
    pub request_id: Option<String>,
}

/// One lease of a set being renewed or released.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetLease {
    pub resource: String,
    pub token: u64,
}

/// What the caller asked for, with the fields each op needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Acquire {
        holder: String,
        ttl_ms: i64,
        /// How many holders may hold the resource at once (1 = a lease).
        limit: u32,
        /// How long the caller waits in the queue in this call (ms; 0 = it does not).
        wait_ms: i64,
        /// The call's requestId, for the place it takes (set by the service: see [`Ticket`]).
        ticket: Option<Ticket>,
        /// The session the permit lives in (`ttl_ms` is then the service's: the session's).
        session: Option<String>,
        /// The permit's value from the grant on (`None`: it has none).
        value: Option<String>,
    },
    Renew {
        holder: String,
        token: u64,
        ttl_ms: i64,
        /// The permit's new value (`None`: it keeps its own).
        value: Option<String>,
    },
    Release {
        holder: String,
        token: u64,
        /// A done release (docs/adr/0012).
        done: Option<Finishing>,
    },
    Get,
    /// The resource once its state is no longer the one `tag` names (at once without one), or
    /// when `wait_ms` has passed.
    Watch {
        tag: Option<String>,
        wait_ms: i64,
    },
    /// Is `token` (of `holder`, when given) a live permit?
    Check {
        token: u64,
        holder: Option<String>,
    },
    /// End `holder`'s permit (with `token`, when given), or every permit when neither is
    /// given (an operator's, audited).
    Revoke {
        holder: Option<String>,
        token: Option<u64>,
    },
    /// End a finished mark early (docs/adr/0012): the finisher names itself and the token it
    /// finished with; an admin needs neither.
    Reopen {
        holder: Option<String>,
        token: Option<u64>,
    },
}

/// What a done release asks for: its result, and how long the mark lasts (ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finishing {
    pub result: Option<String>,
    pub keep_ms: i64,
}

impl Command {
    /// This command waiting `wait_ms` (an acquire; other commands do not wait).
    pub fn with_wait(&self, wait_ms: i64) -> Command {
        match self {
            Command::Acquire {
                holder,
                ttl_ms,
                limit,
                ticket,
                session,
                value,
                ..
            } => Command::Acquire {
                holder: holder.clone(),
                ttl_ms: *ttl_ms,
                limit: *limit,
                wait_ms: wait_ms.max(0),
                ticket: ticket.clone(),
                session: session.clone(),
                value: value.clone(),
            },
            other => other.clone(),
        }
    }

    /// This command made by the call `ticket` names (an acquire; others take no place).
    pub fn with_ticket(self, ticket: Ticket) -> Command {
        match self {
            Command::Acquire {
                holder,
                ttl_ms,
                limit,
                wait_ms,
                session,
                value,
                ..
            } => Command::Acquire {
                holder,
                ttl_ms,
                limit,
                wait_ms,
                ticket: Some(ticket),
                session,
                value,
            },
            other => other,
        }
    }
}

/// A required field was absent (the schema normally catches this first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingField(pub &'static str);

impl LeaseRequest {
    /// Whether it names a set (`resources` or `leases`) rather than one resource.
    pub fn is_set(&self) -> bool {
        self.resources.is_some() || self.leases.is_some()
    }

    /// The resources it names, each with its command: one, or a set's, in request order.
    pub fn members(&self) -> Result<Vec<(String, Command)>, MissingField> {
        if let Some(leases) = &self.leases {
            return leases
                .iter()
                .map(|l| Ok((l.resource.clone(), self.command_with(Some(l.token))?)))
                .collect();
        }
        let resources = match (&self.resources, &self.resource) {
            (Some(resources), _) => resources.clone(),
            (None, Some(resource)) => vec![resource.clone()],
            (None, None) => return Err(MissingField("resource")),
        };
        let command = self.command()?;
        Ok(resources
            .into_iter()
            .map(|r| (r, command.clone()))
            .collect())
    }

    /// The command of a single-resource request.
    pub fn command(&self) -> Result<Command, MissingField> {
        self.command_with(self.token)
    }

    fn command_with(&self, token: Option<u64>) -> Result<Command, MissingField> {
        let holder = || self.holder.clone().ok_or(MissingField("holder"));
        let token = || token.ok_or(MissingField("token"));
        let ttl_ms = i64::from(self.ttl_seconds.unwrap_or(DEFAULT_TTL_SECONDS)) * 1000;
        Ok(match self.op {
            Op::Acquire => Command::Acquire {
                holder: holder()?,
                ttl_ms,
                limit: self.limit.unwrap_or(1),
                wait_ms: i64::from(self.wait_seconds.unwrap_or(0)) * 1000,
                ticket: None,
                session: self.session.clone(),
                value: self.value.clone(),
            },
            Op::Renew => Command::Renew {
                holder: holder()?,
                token: token()?,
                ttl_ms,
                value: self.value.clone(),
            },
            Op::Release => Command::Release {
                holder: holder()?,
                token: token()?,
                done: (self.done == Some(true)).then(|| Finishing {
                    result: self.result.clone(),
                    keep_ms: i64::from(self.keep_done_seconds.unwrap_or(DEFAULT_KEEP_DONE_SECONDS))
                        * 1000,
                }),
            },
            Op::Get => Command::Get,
            Op::Watch => Command::Watch {
                tag: self.state_tag.clone(),
                wait_ms: i64::from(self.wait_seconds.unwrap_or(DEFAULT_WATCH_SECONDS)) * 1000,
            },
            Op::Check => Command::Check {
                token: token()?,
                holder: self.holder.clone(),
            },
            Op::Revoke => Command::Revoke {
                holder: self.holder.clone(),
                token: self.token,
            },
            Op::Reopen => Command::Reopen {
                holder: self.holder.clone(),
                token: self.token,
            },
            // Not a resource's command: the service takes them before it asks for one.
            Op::List | Op::Audit | Op::Open | Op::Keepalive | Op::Close => {
                return Err(MissingField("resource"));
            }
        })
    }

    /// The ticket of this request's call, kept until `until` (when its record ends): a digest
    /// of its requestId and input, so that only a retry of this very request matches it.
    /// `None` without a requestId.
    pub fn ticket(&self, until: crate::clock::Millis) -> Option<Ticket> {
        let id = self.request_id.as_deref()?;
        let mut digest = Sha256::new();
        digest.update(id.as_bytes());
        digest.update([0]);
        digest.update(self.fingerprint().as_bytes());
        Some(Ticket {
            key: hex::encode(&digest.finalize()[..16]),
            until,
        })
    }

    /// SHA-256 (hex) of the input that decides the outcome, with defaults filled in, so that a retry
    /// which spells the same request differently (field order, an explicit default ttl) matches,
    /// and one that asks for something else does not. tenantId and requestId are left out: they
    /// are the record's key, not its content; so is waitSeconds, how long this one call waits
    /// (a retry resumes the same place with whatever wait it asks).
    pub fn fingerprint(&self) -> String {
        #[derive(Serialize)]
        struct Canonical<'a> {
            op: &'a str,
            resource: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            resources: Option<&'a [String]>,
            #[serde(skip_serializing_if = "Option::is_none")]
            leases: Option<&'a [SetLease]>,
            holder: Option<&'a str>,
            ttl_seconds: Option<u32>,
            token: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            limit: Option<u32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            session: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            reason: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            value: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            candidates: Option<&'a [String]>,
            /// A done release's (its keep with the default filled in): a plain release's
            /// fingerprint is what it was before marks.
            #[serde(skip_serializing_if = "Option::is_none")]
            done: Option<(Option<&'a str>, u32)>,
        }
        let spec = self.op.spec();
        // A session's permit has no ttl of its own; a keepalive without one takes the session's
        // (so its absence is not 30).
        let ttl_matters = spec.ttl && self.session.is_none();
        let ttl_seconds = match self.op {
            Op::Keepalive => self.ttl_seconds,
            _ => ttl_matters.then(|| self.ttl_seconds.unwrap_or(DEFAULT_TTL_SECONDS)),
        };
        let canonical = Canonical {
            op: self.op.as_str(),
            resource: self.resource.as_deref(),
            resources: self.resources.as_deref(),
            leases: self.leases.as_deref(),
            holder: self.holder.as_deref(),
            ttl_seconds,
            token: self.token,
            // Left out at its default, so a lease's fingerprint is what it was before limits.
            limit: self
                .limit
                .filter(|l| *l != 1 && spec.limit != super::ops::Field::Unused),
            reason: self.reason.as_deref(),
            session: self.session.as_deref(),
            value: self.value.as_deref(),
            candidates: self.candidates.as_deref(),
            done: (self.done == Some(true)).then(|| {
                (
                    self.result.as_deref(),
                    self.keep_done_seconds.unwrap_or(DEFAULT_KEEP_DONE_SECONDS),
                )
            }),
        };
        // Serializing a struct of strings and integers cannot fail.
        let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
        hex::encode(Sha256::digest(bytes))
    }
}

#[cfg(test)]
mod tests;
