//! The lease ops, once: what each takes, whether it writes, and what its identity includes.
//! Request parsing, the fingerprint, the service and the edges ask this table, never `op ==`.
//! `shared/schemas/lease-input.json` says the same for callers; the test below holds the two
//! together.

use super::request::Op;

/// Whether an op takes a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Required,
    /// The op takes it when given.
    Optional,
    /// Not the op's: the schema allows it (one body shape for every op) and the op ignores it.
    Unused,
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
}

/// Every op, in the order the schema lists them.
pub const OPS: [Spec; 8] = [
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
        };
        &OPS[row]
    }

    /// A mutation (see [`Spec::writes`]).
    pub fn writes(self) -> bool {
        self.spec().writes
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

    /// The published schema requires exactly what the table says each op requires, and takes
    /// the rest, and names exactly the table's ops; the new ops (list, revoke, audit) refuse
    /// every field the table says they do not take.
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
            ];
            let new_op = matches!(spec.op, Op::List | Op::Revoke | Op::Audit);
            let mut full = json!({"op": spec.op.as_str()});
            for ((name, value), field) in samples.iter().zip(fields) {
                if field != Field::Unused {
                    full[*name] = value.clone();
                }
            }
            assert!(valid(&full), "{full}");
            for ((name, value), field) in samples.iter().zip(fields) {
                let mut changed = full.clone();
                if field == Field::Unused {
                    changed[*name] = value.clone();
                    if new_op {
                        assert!(!valid(&changed), "{} takes no {name}", spec.op.as_str());
                    }
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
}
