//! Every lease op with a request and its answer, for the docs page: one worker's morning on
//! `deploy:prod`. The answers are made by the same code that answers calls (the answer's
//! constructors, and `decide` for the refusal), at a fixed time, so the page shows what the
//! service says and cannot drift from it. They are shown as `?signed=false` answers them.

use crate::clock::{Millis, iso8601};
use crate::lease::answer::{AuditEntry, Holder, list_entry, unsigned};
use crate::lease::session::{Session, SessionPermit};
use crate::lease::{Decision, LeaseAnswer, LeaseRequest, LeaseState, Op, decide};
use serde_json::{Value, json};

/// 2026-11-29T10:00:00.000Z: when the examples happen.
const NOW: Millis = 1_795_946_400_000;
const SECOND: Millis = 1_000;

/// One op as the docs page shows it.
pub struct Example {
    /// Its heading: the op, and what sets this call apart when the op comes twice.
    pub title: &'static str,
    pub op: Op,
    /// What it is for, in a sentence.
    pub says: &'static str,
    /// Which key sends it: `KEY` or `ADMIN_KEY` (the README's shell variables).
    pub key: &'static str,
    pub request: Value,
    /// The answer as `?signed=false` returns it.
    pub answer: Value,
}

impl Example {
    /// The request as a command to paste, in the README's convention (`$URL` is the base URL).
    pub fn curl(&self) -> String {
        format!(
            "curl -s \"$URL/api/v1/lease?signed=false\" -H \"X-API-KEY: ${}\" -d '{}'",
            self.key, self.request
        )
    }
}

/// The ops in the order a worker meets them.
pub fn examples() -> Vec<Example> {
    let w7 = |token, expires| LeaseState::granted(token, "worker-7", expires);
    let held = w7(1, NOW + 60 * SECOND);
    let renewed = w7(1, NOW + 80 * SECOND);
    let opened = Session::open(SESSION_ID, "agent-3", 60 * SECOND, NOW + 100 * SECOND);
    let mut in_session = LeaseState::granted(1, "agent-3", opened.expires_at);
    in_session.permits[0].session = Some(SESSION_ID.into());
    let mut kept = opened.clone();
    kept.expires_at = NOW + 190 * SECOND;
    kept.permits.insert(
        "invoice:INV-1009".into(),
        SessionPermit { token: 1, limit: 1 },
    );
    let permit = Holder {
        holder: "worker-7".into(),
        fencing_token: 1,
        expires_at: iso8601(NOW + 80 * SECOND),
        session: None,
        value: None,
        resource: None,
    };
    let acquire = json!({"op": "acquire", "tenantId": "team-a", "resource": "deploy:prod", "holder": "worker-7", "ttlSeconds": 60, "requestId": "w7-deploy-1"});
    let refused = json!({"op": "acquire", "tenantId": "team-a", "resource": "deploy:prod", "holder": "worker-8", "ttlSeconds": 60});
    vec![
        Example {
            title: "acquire",
            op: Op::Acquire,
            says: "Take the resource for ttlSeconds (1-3600, default 30). Granted with a fencing token one above any issued before for it; a requestId makes a retry safe.",
            key: "KEY",
            answer: data(LeaseAnswer::granted(
                Op::Acquire,
                &held,
                Some("worker-7"),
                NOW,
            )),
            request: acquire,
        },
        Example {
            title: "acquire, refused",
            op: Op::Acquire,
            says: "While another holds it: fail, a witness naming the rule, and who holds it until when.",
            key: "KEY",
            answer: data(refusal(&held, &refused, NOW + 5 * SECOND)),
            request: refused,
        },
        Example {
            title: "renew",
            op: Op::Renew,
            says: "Keep it: holder and token must match the live lease; it is held ttlSeconds from now. A renew that fails is how a holder learns it lost the lease.",
            key: "KEY",
            request: json!({"op": "renew", "tenantId": "team-a", "resource": "deploy:prod", "holder": "worker-7", "token": 1, "ttlSeconds": 60}),
            answer: data(LeaseAnswer::granted(
                Op::Renew,
                &renewed,
                Some("worker-7"),
                NOW + 20 * SECOND,
            )),
        },
        Example {
            title: "get",
            op: Op::Get,
            says: "Who holds it: always pass; granted says whether someone does.",
            key: "KEY",
            request: json!({"op": "get", "tenantId": "team-a", "resource": "deploy:prod"}),
            answer: data(LeaseAnswer::observed(&renewed, None, NOW + 21 * SECOND)),
        },
        Example {
            title: "check",
            op: Op::Check,
            says: "Whether a token (and holder) is a live permit's: what a store that cannot keep the highest token asks before a write.",
            key: "KEY",
            request: json!({"op": "check", "tenantId": "team-a", "resource": "deploy:prod", "token": 1, "holder": "worker-7"}),
            answer: data(LeaseAnswer::checked(
                &renewed,
                1,
                Some("worker-7"),
                NOW + 22 * SECOND,
            )),
        },
        Example {
            title: "list",
            op: Op::List,
            says: "Your tenant's resources with a live permit or a waiter, by name, a page at a time (nextCursor continues; null at the end).",
            key: "KEY",
            request: json!({"op": "list", "tenantId": "team-a", "prefix": "deploy:"}),
            answer: data(LeaseAnswer::listed(
                vec![list_entry("deploy:prod", &renewed, NOW + 23 * SECOND)],
                None,
                NOW + 23 * SECOND,
            )),
        },
        Example {
            title: "revoke",
            op: Op::Revoke,
            says: "End a holder's permit at once, with a reason the audit keeps: an admin key only. The revoked holder's next renew fails with REVOKED.",
            key: "ADMIN_KEY",
            request: json!({"op": "revoke", "tenantId": "team-a", "resource": "deploy:prod", "holder": "worker-7", "reason": "wedged since 03:00"}),
            answer: data(LeaseAnswer::revoked(
                &LeaseState::vacant(1),
                vec![permit.clone()],
                NOW + 30 * SECOND,
            )),
        },
        Example {
            title: "audit",
            op: Op::Audit,
            says: "The revokes, newest first, kept 90 days: an admin key only.",
            key: "ADMIN_KEY",
            request: json!({"op": "audit", "tenantId": "team-a", "resource": "deploy:prod"}),
            answer: data(LeaseAnswer::audited(
                vec![AuditEntry {
                    id: "6f1c0e9a4b2d47e8a3c5b7d9e1f20384".into(),
                    at: iso8601(NOW + 30 * SECOND),
                    actor: "key:3f9a2c71d04b8e65".into(),
                    resource: Some("deploy:prod".into()),
                    session: None,
                    ended: vec![permit],
                    reason: "wedged since 03:00".into(),
                    reopened: None,
                }],
                None,
                NOW + 31 * SECOND,
            )),
        },
        Example {
            title: "acquire, after the revoke",
            op: Op::Acquire,
            says: "The next holder gets the next token: a store that refuses tokens below 2 is now safe from worker-7, however long it was paused.",
            key: "KEY",
            request: json!({"op": "acquire", "tenantId": "team-a", "resource": "deploy:prod", "holder": "worker-8", "ttlSeconds": 60}),
            answer: data(LeaseAnswer::granted(
                Op::Acquire,
                &LeaseState::granted(2, "worker-8", NOW + 100 * SECOND),
                Some("worker-8"),
                NOW + 40 * SECOND,
            )),
        },
        Example {
            title: "release",
            op: Op::Release,
            says: "Done: holder and token must match. The next acquire gets a larger token still.",
            key: "KEY",
            request: json!({"op": "release", "tenantId": "team-a", "resource": "deploy:prod", "holder": "worker-8", "token": 2}),
            answer: data(LeaseAnswer::granted(
                Op::Release,
                &LeaseState::vacant(2),
                Some("worker-8"),
                NOW + 90 * SECOND,
            )),
        },
        Example {
            title: "open",
            op: Op::Open,
            says: "A session: one keepalive for every hold acquired in it, and its end (a close, or no keepalive for ttlSeconds) frees them all at once. Its id is chosen by the server.",
            key: "KEY",
            request: json!({"op": "open", "tenantId": "team-a", "holder": "agent-3", "ttlSeconds": 60}),
            answer: data(LeaseAnswer::about_session(
                Op::Open,
                Some(&opened),
                NOW + 100 * SECOND,
                Vec::new(),
            )),
        },
        Example {
            title: "acquire, in a session",
            op: Op::Acquire,
            says: "session instead of ttlSeconds: the permit lives exactly as long as the session, its expiresAt the session's. Its token is the resource's next, as always.",
            key: "KEY",
            request: json!({"op": "acquire", "tenantId": "team-a", "resource": "invoice:INV-1009", "holder": "agent-3", "session": SESSION_ID}),
            answer: data(LeaseAnswer::granted(
                Op::Acquire,
                &in_session,
                Some("agent-3"),
                NOW + 101 * SECOND,
            )),
        },
        Example {
            title: "keepalive",
            op: Op::Keepalive,
            says: "The session and every permit in it held ttlSeconds from now (default: the length it was opened with). A session that has ended answers SESSION_EXPIRED: its permits are free.",
            key: "KEY",
            request: json!({"op": "keepalive", "tenantId": "team-a", "session": SESSION_ID, "holder": "agent-3"}),
            answer: data(LeaseAnswer::about_session(
                Op::Keepalive,
                Some(&kept),
                NOW + 130 * SECOND,
                Vec::new(),
            )),
        },
        Example {
            title: "close",
            op: Op::Close,
            says: "Ends the session and every permit in it now; their waiters are served as after a release. session is null from then on.",
            key: "KEY",
            request: json!({"op": "close", "tenantId": "team-a", "session": SESSION_ID, "holder": "agent-3"}),
            answer: data(LeaseAnswer::about_session(
                Op::Close,
                None,
                NOW + 140 * SECOND,
                Vec::new(),
            )),
        },
    ]
}

/// The session of the examples' id (a real one is 128 random bits in base32, as this looks).
pub const SESSION_ID: &str = "k7f3q2m5x4w4c2b6n2p5r7t3ya";

/// The answer `decide` gives `request` against `state`: the rule that stops it, as a call sees it.
fn refusal(state: &LeaseState, request: &Value, now: Millis) -> LeaseAnswer {
    let request: LeaseRequest = serde_json::from_value(request.clone()).unwrap_or_else(|e| {
        unreachable!("the example is a valid request: {e}");
    });
    let command = request
        .command()
        .unwrap_or_else(|_| unreachable!("the example names what its op needs"));
    match decide(state, &command, now) {
        Decision::Deny(witnesses) => {
            LeaseAnswer::denied(request.op, state, request.holder.as_deref(), now, witnesses)
        }
        other => unreachable!("the example is refused, not {other:?}"),
    }
}

/// `{"data": ...}` as `?signed=false` sends it.
fn data(answer: LeaseAnswer) -> Value {
    let data = serde_json::to_value(answer).unwrap_or_default();
    unsigned(json!({ "data": data }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::lease_input;

    /// Each example's request is one the service takes, and its answer is one the documented
    /// schema describes, of the op it is for.
    #[test]
    fn every_example_is_a_valid_request_and_a_documented_answer() {
        let schema: Value = serde_json::from_str(crate::schema::LEASE_ANSWER_JSON).unwrap();
        let answers = jsonschema::validator_for(&schema).unwrap();
        let examples = examples();
        for example in &examples {
            lease_input()
                .check(&example.request)
                .unwrap_or_else(|w| panic!("{}: {w:?}", example.request));
            let errors: Vec<String> = answers
                .iter_errors(&example.answer)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{}: {errors:?}", example.answer);
            assert_eq!(example.answer["data"]["op"], example.op.as_str());
            assert_eq!(example.request["op"], example.op.as_str());
        }
        let ops: std::collections::BTreeSet<&str> =
            examples.iter().map(|e| e.op.as_str()).collect();
        assert_eq!(ops.len(), 11, "every op has an example: {ops:?}");
        let titles: std::collections::BTreeSet<&str> = examples.iter().map(|e| e.title).collect();
        assert_eq!(
            titles.len(),
            examples.len(),
            "each example has a heading of its own"
        );
        let refused = &examples[1].answer["data"];
        assert_eq!(refused["status"], "fail");
        assert_eq!(refused["witnesses"][0]["ruleId"], "LEASE_HELD");
        assert_eq!(refused["holder"], "worker-7");
    }
}
