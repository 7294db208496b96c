//! What the schema cannot say of a request's shape: one resource or one set, the fields each op
//! takes and no other, each named in a witness with the value sent.

use super::{LeaseRequest, MAX_RESULT_BYTES, MAX_VALUE_BYTES};
use crate::lease::Op;
use crate::lease::model::MAX_CANDIDATES;
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
        errors.extend(self.finishing_errors());
        // A reopen names a mark by its finisher: holder and token together, or neither (an
        // admin's reopen of whatever mark stands).
        if self.op == Op::Reopen && self.holder.is_some() != self.token.is_some() {
            let missing = if self.holder.is_some() {
                "token"
            } else {
                "holder"
            };
            errors.push(Witness::new(
                "REQUIRED",
                &format!("/{missing}"),
                "reopen names its finisher by holder and token together, or by neither (an admin)",
            ));
        }
        errors.extend(self.candidates_errors());
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

    /// A done release's fields (docs/adr/0012): `done` on a release of one resource only,
    /// `result` and `keepDoneSeconds` only with `done: true`, `result` at most
    /// [`MAX_RESULT_BYTES`] bytes.
    fn finishing_errors(&self) -> Vec<Witness> {
        let mut errors = Vec::new();
        let finishing = [
            ("done", self.done.map(Value::from)),
            ("result", self.result.as_deref().map(Value::from)),
            ("keepDoneSeconds", self.keep_done_seconds.map(Value::from)),
        ];
        let release = self.op == Op::Release;
        let done = self.done == Some(true);
        for (field, sent) in finishing {
            let Some(sent) = sent else { continue };
            let why = if !release {
                format!(
                    "op {} does not take {field}: only release does",
                    self.op.as_str()
                )
            } else if field == "done" && self.leases.is_some() {
                "a set's release does not finish its resources: release each with done".to_owned()
            } else if field != "done" && !done {
                format!("{field} comes with done: true")
            } else {
                continue;
            };
            errors.push(
                Witness::new("NOT_TAKEN", &format!("/{field}"), why)
                    .expected(format!("no {field} here"))
                    .actual(sent),
            );
        }
        if let Some(result) = self
            .result
            .as_deref()
            .filter(|r| r.len() > MAX_RESULT_BYTES)
        {
            errors.push(
                Witness::new(
                    "RESULT_TOO_LONG",
                    "/result",
                    format!("a result is at most {MAX_RESULT_BYTES} bytes of UTF-8"),
                )
                .expected(format!("at most {MAX_RESULT_BYTES} bytes"))
                .actual(result.len()),
            );
        }
        errors
    }

    /// An acquire's `candidates` (docs/adr/0012): acquire only, instead of `resource` or a set,
    /// without `waitSeconds`, each name once.
    fn candidates_errors(&self) -> Vec<Witness> {
        let Some(candidates) = &self.candidates else {
            return Vec::new();
        };
        let mut errors = Vec::new();
        let mut refuse = |rule: &str, field: &str, why: String| {
            errors.push(Witness::new(rule, field, why));
        };
        if self.op != Op::Acquire {
            refuse(
                "NOT_TAKEN",
                "/candidates",
                format!(
                    "op {} does not take candidates: only acquire does",
                    self.op.as_str()
                ),
            );
        }
        for (field, sent) in [
            ("resource", self.resource.is_some()),
            ("resources", self.resources.is_some()),
            ("leases", self.leases.is_some()),
        ] {
            if sent {
                refuse(
                    "ONE_TARGET",
                    "/candidates",
                    format!("send candidates or {field}, not both"),
                );
            }
        }
        if self.wait_seconds.is_some() {
            refuse(
                "NOT_TAKEN",
                "/waitSeconds",
                "an acquire of candidates takes the first free one at once: it does not wait"
                    .to_owned(),
            );
        }
        let mut seen = std::collections::HashSet::new();
        for (i, name) in candidates.iter().enumerate() {
            if !seen.insert(name) {
                errors.push(
                    Witness::new(
                        "DUPLICATE",
                        &format!("/candidates/{i}"),
                        "each candidate once",
                    )
                    .actual(name.as_str()),
                );
            }
        }
        if !(2..=MAX_CANDIDATES).contains(&candidates.len()) {
            errors.push(
                Witness::new(
                    "CANDIDATES",
                    "/candidates",
                    format!("an acquire names 2 to {MAX_CANDIDATES} candidates"),
                )
                .expected(format!("2..{MAX_CANDIDATES}"))
                .actual(candidates.len()),
            );
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
