//! The lease ops, once: what each takes, whether it writes, and what its identity includes.
//! Request parsing, the fingerprint, the service and the edges ask this table, never `op ==`.
//! `shared/schemas/lease-input.json` says the same for callers; the test below holds the two
//! together.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Acquire,
    Renew,
    Release,
    Get,
    Check,
    List,
    Revoke,
    Audit,
    Open,
    Keepalive,
    Close,
    Watch,
    Reopen,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::Renew => "renew",
            Op::Release => "release",
            Op::Get => "get",
            Op::Check => "check",
            Op::List => "list",
            Op::Revoke => "revoke",
            Op::Audit => "audit",
            Op::Open => "open",
            Op::Keepalive => "keepalive",
            Op::Close => "close",
            Op::Watch => "watch",
            Op::Reopen => "reopen",
        }
    }
}

/// Whether an op takes a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Required,
    /// The op takes it when given.
    Optional,
    /// Taken and ignored, as documented: a requestId on a single resource's read (there is
    /// nothing to apply once), so that a caller may send one on every call.
    Ignored,
    /// Not the op's: sending it is refused (`NOT_TAKEN`). A field that looks like a fence or a
    /// bound is never accepted and then ignored (the attack of 2026-12-05: `check` took `limit`
    /// and `waitSeconds` silently).
    Unused,
}

/// How an op takes `session` (docs/adr/0010).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionField {
    Unused,
    /// The session it works on.
    Required,
    /// acquire: the permit lives as long as the session, so it takes no `ttlSeconds`.
    InsteadOfTtl,
    /// get, revoke: the session is what it reads or ends, instead of a resource.
    InsteadOfResource,
}

/// What an op needs and does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub op: Op,
    /// It may change the lease: a mutation. A requestId names it (its answer is recorded and
    /// replayed), a payment is settled only once it committed, and it counts as granted or denied.
    /// An op that does not write is a read: nothing to record, a paid read is kept under its
    /// payment identifier instead.
    pub writes: bool,
    pub holder: Field,
    pub token: Field,
    pub limit: Field,
    /// `waitSeconds`: how long it waits in the queue (docs/adr/0007).
    pub wait: Field,
    /// `ttlSeconds` is part of what it asks (and so of its requestId's fingerprint).
    pub ttl: bool,
    /// `resource`: the one it works on (or a set's, for the ops that take sets).
    pub resource: Field,
    /// `reason`: why (revoke's audit entry).
    pub reason: Field,
    /// It answers a page of the tenant's entries (`cursor`, `pageSize`), not one resource.
    pub pages: bool,
    /// Only an admin may call it: an API key with the admin role, or a paying wallet in its
    /// own tenant (docs/adr/0008). Anyone else: 403 `FORBIDDEN`, before anything is read.
    pub admin: bool,
    /// The field a set of resources comes in for it (docs/adr/0006): `resources` (names) or
    /// `leases` (names with tokens); `None`: it takes one resource only.
    pub set: Option<&'static str>,
    /// `prefix`: only the resources whose names start with it.
    pub prefix: Field,
    /// `value`: the holder's note, kept with its permit (acquire sets it, renew changes it).
    pub value: Field,
    /// `stateTag`: the state the caller saw last (watch answers when it is no longer so).
    pub state_tag: Field,
    /// `requestId`: names a mutation's call (its answer is recorded and replayed).
    pub request_id: Field,
    /// `session`: see [`SessionField`].
    pub session: SessionField,
    /// The MCP tools that offer it.
    pub tools: &'static [Tool],
}

/// The MCP tools that carry lease ops: a tool's annotations (read only, destructive) are then
/// true of every op it offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// acquire, renew, release, get, check: no op that ends another's permit.
    Lease,
    /// get, check.
    Read,
    List,
    /// admin only.
    Audit,
    /// destructive: revoke (admin only), and reopen (its finisher, or an admin).
    Revoke,
}

impl Tool {
    pub const ALL: [Tool; 5] = [
        Tool::Lease,
        Tool::Read,
        Tool::List,
        Tool::Audit,
        Tool::Revoke,
    ];

    /// Its name in the MCP catalogue.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Lease => "lease",
            Tool::Read => "lease_read",
            Tool::List => "lease_list",
            Tool::Audit => "lease_audit",
            Tool::Revoke => "lease_revoke",
        }
    }

    /// The tool named `name`, if one is.
    pub fn named(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The ops it offers, in the table's order.
    pub fn ops(self) -> impl Iterator<Item = Op> {
        OPS.iter()
            .filter(move |s| s.tools.contains(&self))
            .map(|s| s.op)
    }
}

/// Every op, in the order the schema lists them.
pub const OPS: [Spec; 13] = [
    Spec {
        op: Op::Acquire,
        writes: true,
        holder: Field::Required,
        token: Field::Unused,
        limit: Field::Optional,
        wait: Field::Optional,
        ttl: true,
        resource: Field::Required,
        reason: Field::Unused,
        pages: false,
        admin: false,
        set: Some("resources"),
        prefix: Field::Unused,
        value: Field::Optional,
        state_tag: Field::Unused,
        request_id: Field::Optional,
        session: SessionField::InsteadOfTtl,
        tools: &[Tool::Lease],
    },
    Spec {
        op: Op::Renew,
        writes: true,
        holder: Field::Required,
        token: Field::Required,
        limit: Field::Unused,
        wait: Field::Unused,
        ttl: true,
        resource: Field::Required,
        reason: Field::Unused,
        pages: false,
        admin: false,
        set: Some("leases"),
        prefix: Field::Unused,
        value: Field::Optional,
        state_tag: Field::Unused,
        request_id: Field::Optional,
        session: SessionField::Unused,
        tools: &[Tool::Lease],
    },
    Spec {
        op: Op::Release,
        writes: true,
        holder: Field::Required,
        token: Field::Required,
        limit: Field::Unused,
        wait: Field::Unused,
        ttl: false,
        resource: Field::Required,
        reason: Field::Unused,
        pages: false,
        admin: false,
        set: Some("leases"),
        prefix: Field::Unused,
        value: Field::Unused,
        state_tag: Field::Unused,
        request_id: Field::Optional,
        session: SessionField::Unused,
        tools: &[Tool::Lease],
    },
    Spec {
        op: Op::Get,
        writes: false,
        // Whose permit the answer shows first.
        holder: Field::Optional,
        token: Field::Unused,
        limit: Field::Unused,
        wait: Field::Unused,
        ttl: false,
        resource: Field::Required,
        reason: Field::Unused,
        pages: false,
        admin: false,
        set: None,
        prefix: Field::Unused,
        value: Field::Unused,
        state_tag: Field::Unused,
        request_id: Field::Ignored,
        session: SessionField::InsteadOfResource,
        tools: &[Tool::Lease, Tool::Read],
    },
    Spec {
        op: Op::Check,
        writes: false,
        holder: Field::Optional,
        token: Field::Required,
        limit: Field::Unused,
        wait: Field::Unused,
        ttl: false,
        resource: Field::Required,
        reason: Field::Unused,
        pages: false,
        admin: false,
        set: None,
        prefix: Field::Unused,
        value: Field::Unused,
        state_tag: Field::Unused,
        request_id: Field::Ignored,
        session: SessionField::Unused,
        tools: &[Tool::Lease, Tool::Read],
    },
    Spec {
        op: Op::List,
        writes: false,
        holder: Field::Unused,
        token: Field::Unused,
        limit: Field::Unused,
        wait: Field::Unused,
        ttl: false,
        resource: Field::Unused,
        reason: Field::Unused,
        pages: true,
        admin: false,
        set: None,
        prefix: Field::Optional,
        value: Field::Unused,
        state_tag: Field::Unused,
        request_id: Field::Unused,
        session: SessionField::Unused,
        tools: &[Tool::List],
    },
    Spec {
        op: Op::Revoke,
        writes: true,
        // Whose permit it ends, and with which token (a fence: a newer permit of the same
        // holder is left alone); every live permit when neither is given.
        holder: Field::Optional,
        token: Field::Optional,
        limit: Field::Unused,
        wait: Field::Unused,
        ttl: false,
        resource: Field::Required,
        reason: Field::Required,
        pages: false,
        admin: true,
        set: None,
        prefix: Field::Unused,
        value: Field::Unused,
        state_tag: Field::Unused,
        request_id: Field::Optional,
        session: SessionField::InsteadOfResource,
        tools: &[Tool::Revoke],
    },
    Spec {
        op: Op::Audit,
        writes: false,
        holder: Field::Unused,
        token: Field::Unused,
        limit: Field::Unused,
        wait: Field::Unused,
        ttl: false,
        // Only this resource's entries, when given.
        resource: Field::Optional,
        reason: Field::Unused,
        pages: true,
        admin: true,
        set: None,
        prefix: Field::Unused,
        value: Field::Unused,
        state_tag: Field::Unused,
        request_id: Field::Unused,
        session: SessionField::Unused,
        tools: &[Tool::Audit],
    },
    Spec {
        op: Op::Open,
        writes: true,
        // The session's holder: the only one who may keep it alive, close it and acquire in it.
        holder: Field::Required,
        token: Field::Unused,
        limit: Field::Unused,
        wait: Field::Unused,
        ttl: true,
        resource: Field::Unused,
        reason: Field::Unused,
        pages: false,
        admin: false,
        set: None,
        prefix: Field::Unused,
        value: Field::Unused,
        state_tag: Field::Unused,
        request_id: Field::Optional,
        session: SessionField::Unused,
        tools: &[Tool::Lease],
    },
    Spec {
        op: Op::Keepalive,
        writes: true,
        holder: Field::Required,
        token: Field::Unused,
        limit: Field::Unused,
        wait: Field::Unused,
        // Optional: the ttl it was opened with when absent.
        ttl: true,
        resource: Field::Unused,
        reason: Field::Unused,
        pages: false,
        admin: false,
        set: None,
        prefix: Field::Unused,
        value: Field::Unused,
        state_tag: Field::Unused,
        request_id: Field::Optional,
        session: SessionField::Required,
        tools: &[Tool::Lease],
    },
    Spec {
        op: Op::Close,
        writes: true,
        holder: Field::Required,
        token: Field::Unused,
        limit: Field::Unused,
        wait: Field::Unused,
        ttl: false,
        resource: Field::Unused,
        reason: Field::Unused,
        pages: false,
        admin: false,
        set: None,
        prefix: Field::Unused,
        value: Field::Unused,
        state_tag: Field::Unused,
        request_id: Field::Optional,
        session: SessionField::Required,
        tools: &[Tool::Lease],
    },
    Spec {
        op: Op::Watch,
        writes: false,
        // Whose permit the answer shows first, as get's.
        holder: Field::Optional,
        token: Field::Unused,
        limit: Field::Unused,
        // How long it waits for a change (default 20 s).
        wait: Field::Optional,
        ttl: false,
        resource: Field::Required,
        reason: Field::Unused,
        pages: false,
        admin: false,
        set: None,
        prefix: Field::Unused,
        value: Field::Unused,
        state_tag: Field::Optional,
        request_id: Field::Ignored,
        session: SessionField::Unused,
        // Read-only: only in the read tool (the lease tool is for holders).
        tools: &[Tool::Read],
    },
    // Ends a finished mark early (docs/adr/0012): its finisher (holder and the token it
    // finished with), an admin key or the paying wallet; audited like a revoke. The admin rule
    // is the service's (it depends on the mark), not the edge's.
    Spec {
        op: Op::Reopen,
        writes: true,
        holder: Field::Optional,
        token: Field::Optional,
        limit: Field::Unused,
        wait: Field::Unused,
        ttl: false,
        resource: Field::Required,
        reason: Field::Required,
        pages: false,
        admin: false,
        set: None,
        prefix: Field::Unused,
        value: Field::Unused,
        state_tag: Field::Unused,
        request_id: Field::Optional,
        session: SessionField::Unused,
        tools: &[Tool::Revoke],
    },
];

impl Op {
    /// This op's row of [`OPS`].
    pub fn spec(self) -> &'static Spec {
        // Exhaustive: a new op does not compile until it has its row.
        let row = match self {
            Op::Acquire => 0,
            Op::Renew => 1,
            Op::Release => 2,
            Op::Get => 3,
            Op::Check => 4,
            Op::List => 5,
            Op::Revoke => 6,
            Op::Audit => 7,
            Op::Open => 8,
            Op::Keepalive => 9,
            Op::Close => 10,
            Op::Watch => 11,
            Op::Reopen => 12,
        };
        &OPS[row]
    }

    /// A mutation (see [`Spec::writes`]).
    pub fn writes(self) -> bool {
        self.spec().writes
    }

    /// An op on a session itself, not on a resource: open, keepalive, close.
    pub fn is_sessions(self) -> bool {
        let spec = self.spec();
        spec.resource == Field::Unused && !spec.pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn each_row_is_its_op() {
        for spec in &OPS {
            assert_eq!(spec.op.spec(), spec);
        }
    }

    /// The published schema requires exactly what the table says each op requires, takes what
    /// it says each op takes (or ignores), refuses every field it says an op does not take, and
    /// names exactly the table's ops.
    #[test]
    fn the_input_schema_agrees_with_the_table() {
        let schema: Value = serde_json::from_str(crate::schema::LEASE_INPUT_JSON).unwrap();
        let names: Vec<&str> = OPS.iter().map(|s| s.op.as_str()).collect();
        assert_eq!(schema["properties"]["op"]["enum"], json!(names));
        let valid = |body: &Value| crate::schema::lease_input().check(body).is_ok();
        let samples = [
            ("resource", json!("r")),
            ("holder", json!("h")),
            ("token", json!(1)),
            ("limit", json!(2)),
            ("reason", json!("why")),
            ("ttlSeconds", json!(30)),
            ("waitSeconds", json!(5)),
            ("requestId", json!("req-1")),
        ];
        for spec in &OPS {
            let fields = [
                spec.resource,
                spec.holder,
                spec.token,
                spec.limit,
                spec.reason,
                if spec.ttl {
                    Field::Optional
                } else {
                    Field::Unused
                },
                spec.wait,
                spec.request_id,
            ];
            let mut full = json!({"op": spec.op.as_str()});
            for ((name, value), field) in samples.iter().zip(fields) {
                if field != Field::Unused {
                    full[*name] = value.clone();
                }
            }
            let session = json!("abcdefghijklmnopqrstuvwxyz");
            let with = |mut body: Value, name: &str, value: &Value| {
                body[name] = value.clone();
                body
            };
            let without = |mut body: Value, name: &str| {
                body.as_object_mut().unwrap().remove(name);
                body
            };
            let op = spec.op.as_str();
            match spec.session {
                SessionField::Unused => {
                    assert!(!valid(&with(full.clone(), "session", &session)), "{op}");
                }
                SessionField::Required => {
                    assert!(!valid(&full), "{op} without a session");
                    full["session"] = session.clone();
                }
                SessionField::InsteadOfTtl => {
                    let bound = with(without(full.clone(), "ttlSeconds"), "session", &session);
                    assert!(valid(&bound), "{bound}");
                    assert!(!valid(&with(full.clone(), "session", &session)), "{op}");
                }
                SessionField::InsteadOfResource => {
                    // A session is whole: no holder or token picks part of it.
                    let whole = without(
                        without(without(full.clone(), "resource"), "holder"),
                        "token",
                    );
                    let of_session = with(whole, "session", &session);
                    assert!(valid(&of_session), "{of_session}");
                    for part in ["holder", "token"] {
                        let value = if part == "token" {
                            json!(1)
                        } else {
                            json!("h")
                        };
                        let picked = with(of_session.clone(), part, &value);
                        assert!(!valid(&picked), "{picked}");
                    }
                    assert!(!valid(&with(full.clone(), "session", &session)), "{op}");
                }
            }
            assert!(valid(&full), "{full}");
            for ((name, value), field) in samples.iter().zip(fields) {
                let mut changed = full.clone();
                if field == Field::Unused {
                    changed[*name] = value.clone();
                    assert!(!valid(&changed), "{} takes no {name}", spec.op.as_str());
                    continue;
                }
                changed.as_object_mut().unwrap().remove(*name);
                assert_eq!(
                    valid(&changed),
                    field != Field::Required,
                    "{} without {name}",
                    spec.op.as_str()
                );
            }
        }
    }

    /// The bounds the rules keep are the ones the schema publishes: a wait of at most
    /// `MAX_WAIT_MS`, a limit of at most `MAX_LIMIT`, a token below `MAX_TOKEN`.
    #[test]
    fn the_input_schemas_bounds_are_the_rules_bounds() {
        use crate::lease::model::{MAX_LIMIT, MAX_TOKEN, MAX_WAIT_MS};
        let schema: Value = serde_json::from_str(crate::schema::LEASE_INPUT_JSON).unwrap();
        let field = |name: &str| &schema["properties"][name];
        let wait_s = field("waitSeconds")["maximum"].as_i64().unwrap();
        assert_eq!(wait_s * 1000, MAX_WAIT_MS);
        assert_eq!(field("limit")["maximum"], json!(MAX_LIMIT));
        let token = &field("leases")["items"]["properties"]["token"];
        assert_eq!(token["maximum"], json!(MAX_TOKEN));
        assert_eq!(
            field("token")["maximum"].as_u64().unwrap_or(MAX_TOKEN),
            MAX_TOKEN
        );
    }

    /// The sets the table says each op takes are the fields its MCP tools publish, and every op
    /// is offered by some tool.
    #[test]
    fn every_op_has_a_tool_and_its_sets_fields() {
        for spec in &OPS {
            assert!(!spec.tools.is_empty(), "{} has no tool", spec.op.as_str());
            for tool in spec.tools {
                assert!(tool.ops().any(|op| op == spec.op));
                assert_eq!(Tool::named(tool.name()), Some(*tool));
                let (schema, _) = crate::schema::lease_tool(*tool);
                if let Some(field) = spec.set {
                    assert!(schema["properties"].get(field).is_some(), "{field}");
                }
            }
        }
    }
}
