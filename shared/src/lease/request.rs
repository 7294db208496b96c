//! A lease request after validation: the typed input the rules work on.

pub use super::ops::Op;
use super::ops::{Field, SessionField};
use crate::lease::model::Ticket;
use crate::witness::Witness;
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
    /// list, audit: at most this many entries (1..100).
    pub page_size: Option<u32>,
    /// revoke: why, for the audit entry.
    pub reason: Option<String>,
    /// acquire, renew: the holder's note, kept with its permit (0..[`MAX_VALUE_BYTES`] bytes).
    pub value: Option<String>,
    /// watch: the `stateTag` the caller saw last.
    pub state_tag: Option<String>,
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

    /// What the schema cannot say of how the resources are named (checked with it, before
    /// anything else looks at the request): one resource or one set, the set that fits the op,
    /// its tokens in `leases`, each resource once.
    pub fn shape_errors(&self) -> Vec<Witness> {
        let mut errors = Vec::new();
        let set_field = match (&self.resources, &self.leases) {
            (Some(_), Some(_)) => {
                errors.push(Witness::new(
                    "ONE_SET",
                    "/leases",
                    "send resources (acquire) or leases (renew, release), not both",
                ));
                return errors;
            }
            (Some(_), None) => "/resources",
            (None, Some(_)) => "/leases",
            (None, None) => return self.not_taken(),
        };
        if self.resource.is_some() {
            errors.push(Witness::new(
                "ONE_TARGET",
                set_field,
                "send resource or a set, not both",
            ));
        }
        let fits = self
            .op
            .spec()
            .set
            .is_some_and(|field| set_field.strip_prefix('/') == Some(field));
        if !fits {
            errors.push(Witness::new(
                "SET_OP",
                set_field,
                "acquire takes a set as resources; renew and release as leases [{resource, token}]; get and check take one resource",
            ).actual(self.op.as_str()));
        }
        if self.resources.is_some() && self.wait_seconds.is_some_and(|w| w > 0) {
            errors.push(Witness::new(
                "SET_WAIT",
                "/waitSeconds",
                "a set is granted whole or not at all, at once: it does not wait",
            ));
        }
        errors.extend(self.not_taken());
        if self.leases.is_some() && self.token.is_some() {
            errors.push(Witness::new(
                "SET_TOKEN",
                "/token",
                "a set's tokens are in leases, one each",
            ));
        }
        if let Some(leases) = &self.leases {
            let mut seen = std::collections::HashSet::new();
            for (i, lease) in leases.iter().enumerate() {
                if !seen.insert(&lease.resource) {
                    errors.push(
                        Witness::new(
                            "DUPLICATE",
                            &format!("/leases/{i}/resource"),
                            "each resource once in a set",
                        )
                        .actual(lease.resource.as_str()),
                    );
                }
            }
        }
        errors
    }

    /// The fields this op does not take ([`Field::Unused`]), or not with the others sent:
    /// sending one is refused, never ignored.
    fn not_taken(&self) -> Vec<Witness> {
        let mut errors = self.unused();
        if let Some(value) = self.value.as_deref().filter(|v| v.len() > MAX_VALUE_BYTES) {
            errors.push(
                Witness::new(
                    "VALUE_TOO_LONG",
                    "/value",
                    format!("a value is at most {MAX_VALUE_BYTES} bytes of UTF-8"),
                )
                .expected(format!("at most {MAX_VALUE_BYTES} bytes"))
                .actual(value.len()),
            );
        }
        let spec = self.op.spec();
        match (spec.session, &self.session) {
            (SessionField::InsteadOfTtl, Some(_)) if self.ttl_seconds.is_some() => {
                errors.push(
                    Witness::new(
                        "NOT_TAKEN",
                        "/ttlSeconds",
                        "a permit in a session lives as long as the session: send session or ttlSeconds, not both",
                    )
                    .expected(format!("no ttlSeconds with session on op {}", self.op.as_str()))
                    .actual(self.ttl_seconds.map(Value::from).unwrap_or_default()),
                );
            }
            (SessionField::InsteadOfResource, Some(_)) if self.resource.is_some() => {
                errors.push(Witness::new(
                    "ONE_TARGET",
                    "/session",
                    format!(
                        "op {} takes resource or session, not both",
                        self.op.as_str()
                    ),
                ));
            }
            // A session is whole: no holder or token picks part of it (the attack of
            // 2026-12-05: a revoke of a session with another holder ended it all).
            (SessionField::InsteadOfResource, Some(_)) => {
                let parts = [
                    ("holder", self.holder.as_deref().map(Value::from)),
                    ("token", self.token.map(Value::from)),
                ];
                for (field, sent) in parts {
                    if let Some(sent) = sent {
                        errors.push(
                            Witness::new(
                                "NOT_TAKEN",
                                &format!("/{field}"),
                                format!(
                                    "op {} of a session takes no {field}: it is the whole session's",
                                    self.op.as_str()
                                ),
                            )
                            .expected(format!("no {field} with session"))
                            .actual(sent),
                        );
                    }
                }
            }
            _ => {}
        }
        errors
    }

    /// The fields this op does not take at all ([`Field::Unused`]).
    fn unused(&self) -> Vec<Witness> {
        let spec = self.op.spec();
        let takes = |field: Field| field != Field::Unused;
        // (field, the value sent, the op takes it)
        let fields = [
            (
                "resource",
                self.resource.as_deref().map(Value::from),
                takes(spec.resource),
            ),
            (
                "holder",
                self.holder.as_deref().map(Value::from),
                takes(spec.holder),
            ),
            ("token", self.token.map(Value::from), takes(spec.token)),
            ("ttlSeconds", self.ttl_seconds.map(Value::from), spec.ttl),
            ("limit", self.limit.map(Value::from), takes(spec.limit)),
            (
                "waitSeconds",
                self.wait_seconds.map(Value::from),
                takes(spec.wait),
            ),
            (
                "requestId",
                self.request_id.as_deref().map(Value::from),
                takes(spec.request_id),
            ),
            (
                "reason",
                self.reason.as_deref().map(Value::from),
                takes(spec.reason),
            ),
            (
                "cursor",
                self.cursor.as_deref().map(Value::from),
                spec.pages,
            ),
            ("pageSize", self.page_size.map(Value::from), spec.pages),
            (
                "session",
                self.session.as_deref().map(Value::from),
                spec.session != SessionField::Unused,
            ),
            (
                "prefix",
                self.prefix.as_deref().map(Value::from),
                takes(spec.prefix),
            ),
            (
                "value",
                self.value.as_deref().map(Value::from),
                takes(spec.value),
            ),
            (
                "stateTag",
                self.state_tag.as_deref().map(Value::from),
                takes(spec.state_tag),
            ),
        ];
        fields
            .into_iter()
            .filter_map(|(field, value, taken)| value.filter(|_| !taken).map(|v| (field, v)))
            .map(|(field, value)| {
                Witness::new(
                    "NOT_TAKEN",
                    &format!("/{field}"),
                    format!("op {} does not take {field}", self.op.as_str()),
                )
                .expected(format!("no {field} with op {}", self.op.as_str()))
                .actual(value)
            })
            .collect()
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
        };
        // Serializing a struct of strings and integers cannot fail.
        let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
        hex::encode(Sha256::digest(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> LeaseRequest {
        serde_json::from_value(v).unwrap()
    }

    /// A refused field's witness shows what was sent, not the op (the attack of the second
    /// session of 2026-12-05 found `actual: "release"` for a ttlSeconds of 5).
    #[test]
    fn a_refused_field_shows_the_value_sent() {
        let request = parse(
            json!({"op": "release", "resource": "r", "holder": "h", "token": 3, "ttlSeconds": 5}),
        );
        let witnesses = request.shape_errors();
        assert_eq!(witnesses.len(), 1, "{witnesses:?}");
        assert_eq!(
            (witnesses[0].rule_id.as_str(), witnesses[0].path.as_str()),
            ("NOT_TAKEN", "/ttlSeconds")
        );
        assert_eq!(witnesses[0].actual, Some(json!(5)));
        assert_eq!(
            witnesses[0].expected,
            Some(json!("no ttlSeconds with op release"))
        );
    }

    /// get and revoke of a session take no holder or token: a session is ended or shown whole.
    #[test]
    fn a_sessions_get_and_revoke_take_no_holder_or_token() {
        for op in ["get", "revoke"] {
            let body =
                json!({"op": op, "session": "s", "holder": "zzz", "token": 3, "reason": "r"});
            let body = if op == "get" {
                json!({"op": op, "session": "s", "holder": "zzz"})
            } else {
                body
            };
            let paths: Vec<String> = parse(body)
                .shape_errors()
                .into_iter()
                .map(|w| w.path)
                .collect();
            let expected: &[&str] = if op == "get" {
                &["/holder"]
            } else {
                &["/holder", "/token"]
            };
            assert_eq!(paths, expected, "{op}");
        }
        let whole = json!({"op": "revoke", "session": "s", "reason": "r"});
        assert!(parse(whole).shape_errors().is_empty());
    }

    /// A value is bounded in bytes, not characters (the schema's maxLength counts characters):
    /// 1024 bytes of two-byte characters pass, one more is refused, naming the field; and only
    /// acquire and renew take one.
    #[test]
    fn a_value_is_at_most_1024_bytes_and_only_acquire_and_renew_take_one() {
        let paths = |body: serde_json::Value| -> Vec<(String, String)> {
            let witnesses = parse(body).shape_errors();
            witnesses.into_iter().map(|w| (w.rule_id, w.path)).collect()
        };
        let acquire = |value: String| json!({"op": "acquire", "resource": "r", "holder": "h", "value": value});
        assert!(paths(acquire("é".repeat(512))).is_empty());
        assert!(paths(acquire("x".repeat(1024))).is_empty());
        let over = [("VALUE_TOO_LONG".to_owned(), "/value".to_owned())];
        assert_eq!(paths(acquire("é".repeat(513))), over);
        assert_eq!(paths(acquire("x".repeat(1025))), over);
        let renew = json!({"op": "renew", "resource": "r", "holder": "h", "token": 1, "value": ""});
        assert!(paths(renew).is_empty());
        for op in ["release", "check"] {
            let body = json!({"op": op, "resource": "r", "holder": "h", "token": 1, "value": "v"});
            assert_eq!(
                paths(body),
                [("NOT_TAKEN".to_owned(), "/value".to_owned())],
                "{op}"
            );
        }
    }

    /// A field an op does not take is refused, naming it, on every op: never accepted and then
    /// ignored (the attack of 2026-12-05: check, release and get took limit, waitSeconds and
    /// ttlSeconds silently). A requestId on a single resource's read stays taken (and ignored).
    #[test]
    fn a_field_an_op_does_not_take_is_refused_by_name() {
        let refused = |body: serde_json::Value| -> Vec<String> {
            let request = parse(body);
            request.shape_errors().into_iter().map(|w| w.path).collect()
        };
        let r = |op: &str| json!({"op": op, "resource": "r", "holder": "h", "token": 3});
        let with = |mut body: serde_json::Value, field: &str, value: serde_json::Value| {
            body[field] = value;
            body
        };
        for (op, field) in [
            ("check", "limit"),
            ("check", "waitSeconds"),
            ("check", "ttlSeconds"),
            ("release", "limit"),
            ("release", "waitSeconds"),
            ("release", "ttlSeconds"),
            ("renew", "limit"),
            ("renew", "waitSeconds"),
        ] {
            assert_eq!(
                refused(with(r(op), field, json!(2))),
                [format!("/{field}")],
                "{op}"
            );
        }
        let get = json!({"op": "get", "resource": "r"});
        for field in ["limit", "waitSeconds", "ttlSeconds", "token"] {
            assert_eq!(
                refused(with(get.clone(), field, json!(2))),
                [format!("/{field}")]
            );
        }
        let acquire = json!({"op": "acquire", "resource": "r", "holder": "h"});
        assert_eq!(refused(with(acquire, "token", json!(2))), ["/token"]);
        for op in ["get", "check"] {
            let read = with(r(op), "requestId", json!("req-1"));
            let read = if op == "get" {
                with(read, "token", json!(null))
            } else {
                read
            };
            assert!(refused(read).is_empty(), "{op} with a requestId");
        }
    }

    #[test]
    fn fingerprint_ignores_spelling_but_not_meaning() {
        let a = parse(json!({"op": "acquire", "resource": "r", "holder": "h", "requestId": "x"}));
        let b = parse(json!({"holder": "h", "ttlSeconds": 30, "resource": "r", "op": "acquire"}));
        let c = parse(json!({"op": "acquire", "resource": "r", "holder": "h", "ttlSeconds": 31}));
        let d = parse(json!({"op": "acquire", "resource": "r", "holder": "h2"}));
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_ne!(a.fingerprint(), d.fingerprint());
        let waits =
            parse(json!({"op": "acquire", "resource": "r", "holder": "h", "waitSeconds": 5}));
        assert_eq!(a.fingerprint(), waits.fingerprint());
    }

    #[test]
    fn commands_take_the_default_ttl() {
        let r = parse(json!({"op": "acquire", "resource": "r", "holder": "h"}));
        assert_eq!(
            r.command(),
            Ok(Command::Acquire {
                holder: "h".into(),
                ttl_ms: 30_000,
                limit: 1,
                wait_ms: 0,
                ticket: None,
                session: None,
                value: None,
            })
        );
        let r = parse(json!({"op": "renew", "resource": "r", "holder": "h"}));
        assert_eq!(r.command(), Err(MissingField("token")));
    }
}
