//! What the schema cannot say of a request's shape: one resource or one set, the fields each op
//! takes and no other, each named in a witness with the value sent.

use super::{LeaseRequest, MAX_VALUE_BYTES};
use crate::lease::ops::{Field, SessionField};
use crate::witness::Witness;
use serde_json::Value;

impl LeaseRequest {
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
}
