//! Each guard's DynamoDB condition means what `Guard::holds` says, on the real store: over every
//! small lease state (no item; or each counter, free or granted with an expiry around `now`), every
//! guard and each effect `decide` pairs with it, a guarded write commits exactly when `holds` is true, leaves the item
//! as `Effect::apply` says when it does, and hands back the item untouched when it does not.
//! (The Rust side alone is tested in `lease::decide`; this is its translation.)

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::test_store;
use leasekit_core::clock::Millis;
use leasekit_core::lease::model::{Done, EndedHandoff, Handoff, Permit, Place, Revoked, Ticket};
use leasekit_core::lease::{Effect, Guard, LeaseState, MAX_TOKEN, Write};
use leasekit_core::store::{Applied, LeaseKey, LeaseStore};
use leasekit_core::tenant::Tenant;

const NOW: Millis = 1_700_000_000_000;

/// No item (`None`), and every stored mix of counter, holder and expiry the store writes (a
/// holder comes with its expiry: an item with one of them alone is corrupt, see `lease_store`).
fn states() -> Vec<Option<LeaseState>> {
    let mut states = vec![None];
    for last_token in [1, 2, MAX_TOKEN] {
        states.push(Some(LeaseState::vacant(last_token)));
        for holder in ["a", "b"] {
            for expires_at in [NOW - 1, NOW, NOW + 1] {
                states.push(Some(LeaseState::granted(last_token, holder, expires_at)));
            }
        }
    }
    // Semaphores (limit 2): empty, with live and lapsed permits; and a lease that was one.
    for (version, expiries) in [
        (1, vec![]),
        (2, vec![NOW + 1]),
        (3, vec![NOW, NOW + 1]),
        (3, vec![NOW - 1, NOW]),
    ] {
        states.push(Some(semaphore(2, version, &expiries)));
    }
    states.push(Some(LeaseState {
        version: 3,
        ..LeaseState::granted(2, "a", NOW + 1)
    }));
    // A lease whose earlier permit was revoked, and a semaphore with one revoked.
    let revoked = |holder: &str, token| Revoked {
        holder: holder.into(),
        token,
    };
    states.push(Some(LeaseState {
        revoked: vec![revoked("z", 1)],
        ..LeaseState::granted(2, "a", NOW + 1)
    }));
    states.push(Some(LeaseState {
        revoked: vec![revoked("z", 2), revoked("y", 1)],
        ..semaphore(2, 3, &[NOW + 1])
    }));
    // Queues (limit 1, kept as a map): behind a live permit, behind a lapsed one, and only
    // lapsed places left.
    for (version, expiries, place) in [
        (2, vec![NOW + 1], NOW + 1),
        (3, vec![NOW], NOW + 1),
        (3, vec![NOW + 1], NOW),
        (1, vec![], NOW - 1),
    ] {
        states.push(Some(queued(semaphore(1, version, &expiries), place)));
    }
    // Hand-offs (docs/adr/0008): a place with a ticket; a permit handed to a waiting call, live
    // and lapsed (nothing else live: an unseen take must not pass it by); a lease that remembers
    // a hand-off that ended.
    states.push(Some(LeaseState {
        waiters: vec![Place {
            ticket: Some(ticket()),
            ..queued(semaphore(1, 2, &[NOW + 1]), NOW + 1).waiters[0].clone()
        }],
        ..semaphore(1, 2, &[NOW + 1])
    }));
    for expires_at in [NOW + 1, NOW] {
        states.push(Some(handed_to_c(4, expires_at)));
    }
    states.push(Some(LeaseState {
        ended_handoffs: vec![ended_handoff()],
        ..LeaseState::granted(2, "a", NOW + 1)
    }));
    // Finished (docs/adr/0012): a mark that stands, and one that ended (no unseen take lands
    // on either: a stale mark is dropped by a write decided on a read).
    for until in [NOW + 1, NOW] {
        states.push(Some(finished(
            LeaseState {
                version: 3,
                ..LeaseState::vacant(2)
            },
            until,
        )));
    }
    states
}

fn ticket() -> Ticket {
    Ticket {
        key: "0123456789abcdef0123456789abcdef".into(),
        until: NOW + 86_400_000,
    }
}

fn handoff(expires_at: Millis) -> Handoff {
    Handoff {
        ticket: ticket(),
        at: NOW - 10,
        expires_at,
    }
}

/// A hand-off to "c" of token 2 that ended untaken.
fn ended_handoff() -> EndedHandoff {
    EndedHandoff {
        holder: "c".into(),
        token: 2,
        limit: 1,
        handoff: handoff(NOW + 30_000),
    }
}

/// A lease at counter 2 whose permit was handed to "c"'s waiting call, until `expires_at`.
fn handed_to_c(version: u64, expires_at: Millis) -> LeaseState {
    LeaseState {
        last_token: 2,
        limit: 1,
        version,
        permits: vec![Permit {
            handoff: Some(handoff(expires_at)),
            ..Permit::new("c", 2, expires_at)
        }],
        ..LeaseState::default()
    }
}

/// `state` with one place, of "c", lapsing at `until`.
fn queued(state: LeaseState, until: Millis) -> LeaseState {
    LeaseState {
        waiters: vec![Place {
            holder: "c".into(),
            limit: state.limit,
            until,
            ticket: None,
            session: None,
            session_ends: None,
            value: None,
        }],
        ..state
    }
}

/// A limit-2 semaphore at counter 2 and `version`, a permit expiring at each of `expiries`.
fn semaphore(limit: u32, version: u64, expiries: &[Millis]) -> LeaseState {
    LeaseState {
        last_token: 2,
        limit,
        version,
        permits: expiries
            .iter()
            .enumerate()
            .map(|(i, expires_at)| Permit::new(["a", "b"][i], i as u64 + 1, *expires_at))
            .collect(),
        waiters: Vec::new(),
        revoked: Vec::new(),
        ended_handoffs: Vec::new(),
        done: None,
    }
}

/// `state` finished by "a" with token 2, the mark lasting until `until` (docs/adr/0012).
fn finished(state: LeaseState, until: Millis) -> LeaseState {
    LeaseState {
        done: Some(Box::new(Done {
            holder: "a".into(),
            token: 2,
            at: NOW - 10,
            result: Some("shipped".into()),
            until,
        })),
        ..state
    }
}

fn guards() -> Vec<Guard> {
    let held = |holder: &str, token| Guard::HeldBy {
        holder: holder.into(),
        token,
    };
    let mut guards = vec![Guard::Vacant];
    guards.extend([0, 1, 2, MAX_TOKEN].map(|last_token| Guard::VacantAt { last_token }));
    guards.extend([
        held("a", 1),
        held("a", 2),
        held("b", 2),
        held("a", MAX_TOKEN),
    ]);
    for (last_token, version, single_expiry) in [
        (0, 0, None),
        (2, 0, None),
        (2, 1, None),
        (2, 3, None),
        (1, 3, None),
        (2, 0, Some(NOW + 1)),
        (2, 0, Some(NOW - 1)),
        (2, 3, Some(NOW + 1)),
        (2, 2, None),
    ] {
        guards.push(Guard::Version {
            last_token,
            version,
            single_expiry,
        });
    }
    guards
}

/// The effects `decide` pairs with `guard`: a vacant lease is taken; a held one is extended
/// (renew) or cleared (release).
fn effects(guard: &Guard) -> Vec<Effect> {
    match guard {
        Guard::Vacant | Guard::VacantAt { .. } => vec![Effect::Take {
            holder: "c".into(),
            expires_at: NOW + 5_000,
        }],
        Guard::HeldBy { .. } => vec![
            Effect::Extend {
                expires_at: NOW + 5_000,
            },
            Effect::Clear,
        ],
        // A new permit at the next token beside a live one; the last permit released.
        Guard::Version { version, .. } => vec![
            Effect::Replace(LeaseState {
                last_token: 3,
                version: version + 1,
                permits: vec![
                    Permit::new("b", 2, NOW + 1),
                    Permit::new("c", 3, NOW + 5_000),
                ],
                ..semaphore(2, 0, &[])
            }),
            Effect::Replace(semaphore(3, version + 1, &[])),
            // A place behind a live lease (kept as a map); the last waiter served (a lease again).
            Effect::Replace(queued(semaphore(1, version + 1, &[NOW + 1]), NOW + 9_000)),
            Effect::Replace(LeaseState {
                last_token: 3,
                version: version + 1,
                ..LeaseState::granted(3, "c", NOW + 5_000)
            }),
            // A revoke: the lease's permit ended and remembered.
            Effect::Replace(LeaseState {
                version: version + 1,
                revoked: vec![Revoked {
                    holder: "a".into(),
                    token: 2,
                }],
                ..LeaseState::vacant(2)
            }),
            // A permit handed to a waiting call; that hand-off ended and remembered.
            Effect::Replace(handed_to_c(version + 1, NOW + 9_000)),
            Effect::Replace(LeaseState {
                version: version + 1,
                ended_handoffs: vec![ended_handoff()],
                ..LeaseState::vacant(2)
            }),
            // A done release: the permit ended, the mark set.
            Effect::Replace(finished(
                LeaseState {
                    version: version + 1,
                    ..LeaseState::vacant(2)
                },
                NOW + 60_000,
            )),
        ],
    }
}

/// The item as the store lays it out (docs/adr/0006, 0007: `pk`, `tok`, `ver`; a lease's `holder`
/// and `exp`; a versioned resource's `lim`, `pm` and `until`, and `wq` and `wuntil`).
fn item(pk: &str, state: &LeaseState) -> std::collections::HashMap<String, AttributeValue> {
    let n = |v: u64| AttributeValue::N(v.to_string());
    let mut item = std::collections::HashMap::from([
        ("pk".to_owned(), AttributeValue::S(pk.to_owned())),
        ("tok".to_owned(), n(state.last_token)),
    ]);
    // Revoked permits (docs/adr/0008): `rv`, `[{h, t}]`, whatever the format.
    if !state.revoked.is_empty() {
        let rv = state.revoked.iter().map(|r| {
            let entry = [
                ("h".to_owned(), AttributeValue::S(r.holder.clone())),
                ("t".to_owned(), n(r.token)),
            ];
            AttributeValue::M(entry.into())
        });
        item.insert("rv".into(), AttributeValue::L(rv.collect()));
    }
    // A hand-off's fields: `k`, `x` its ticket, `a` when, `e` until when.
    let handoff = |h: &Handoff| {
        [
            ("k".to_owned(), AttributeValue::S(h.ticket.key.clone())),
            ("x".to_owned(), n(h.ticket.until as u64)),
            ("a".to_owned(), n(h.at as u64)),
            ("e".to_owned(), n(h.expires_at as u64)),
        ]
    };
    // Hand-offs that ended untaken: `hd`, `[{h, t, l, k, x, a, e}]`.
    if !state.ended_handoffs.is_empty() {
        let hd = state.ended_handoffs.iter().map(|h| {
            let mut entry: std::collections::HashMap<_, _> = handoff(&h.handoff).into();
            entry.insert("h".into(), AttributeValue::S(h.holder.clone()));
            entry.insert("t".into(), n(h.token));
            entry.insert("l".into(), n(h.limit.into()));
            AttributeValue::M(entry)
        });
        item.insert("hd".into(), AttributeValue::L(hd.collect()));
    }
    if state.version > 0 {
        item.insert("ver".into(), n(state.version));
    }
    // A finished mark: `dn`, `{h, t, a, r?, u}`.
    if let Some(done) = &state.done {
        let mut dn = std::collections::HashMap::from([
            ("h".to_owned(), AttributeValue::S(done.holder.clone())),
            ("t".to_owned(), n(done.token)),
            ("a".to_owned(), n(done.at as u64)),
            ("u".to_owned(), n(done.until as u64)),
        ]);
        if let Some(result) = &done.result {
            dn.insert("r".into(), AttributeValue::S(result.clone()));
        }
        item.insert("dn".into(), AttributeValue::M(dn));
    }
    if state.is_versioned() {
        let pm = state.permits.iter().map(|p| {
            let mut permit = std::collections::HashMap::from([
                ("t".to_owned(), n(p.token)),
                ("e".to_owned(), n(p.expires_at as u64)),
            ]);
            if let Some(h) = &p.handoff {
                permit.insert("v".into(), AttributeValue::M(handoff(h).into()));
            }
            (p.holder.clone(), AttributeValue::M(permit))
        });
        if state.has_live_handoff() {
            item.insert("hv".into(), AttributeValue::Bool(true));
        }
        let until = state
            .permits
            .iter()
            .map(|p| p.expires_at)
            .max()
            .unwrap_or(0);
        item.insert("lim".into(), n(state.limit.into()));
        item.insert("pm".into(), AttributeValue::M(pm.collect()));
        item.insert("until".into(), n(until as u64));
        if let Some(last) = state.waiters.iter().map(|w| w.until).max() {
            let places = state.waiters.iter().map(|w| {
                let mut place = std::collections::HashMap::from([
                    ("h".to_owned(), AttributeValue::S(w.holder.clone())),
                    ("u".to_owned(), n(w.until as u64)),
                    ("l".to_owned(), n(w.limit.into())),
                ]);
                if let Some(t) = &w.ticket {
                    place.insert("k".into(), AttributeValue::S(t.key.clone()));
                    place.insert("x".into(), n(t.until as u64));
                }
                AttributeValue::M(place)
            });
            item.insert("wq".into(), AttributeValue::L(places.collect()));
            item.insert("wuntil".into(), n(last as u64));
        }
        return item;
    }
    if let Some(permit) = state.latest() {
        item.insert("holder".into(), AttributeValue::S(permit.holder.clone()));
        item.insert(
            "exp".into(),
            AttributeValue::N(permit.expires_at.to_string()),
        );
    }
    item
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_guard_commits_exactly_when_it_holds() {
    let test = test_store().await;
    let store = LeaseStore::new(
        test.client.clone(),
        &test.tables.leases,
        &test.tables.requests,
    );
    let tenant = Tenant::for_key("acme", "t1").unwrap();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (s, state) in states().into_iter().enumerate() {
        for (g, guard) in guards().into_iter().enumerate() {
            for (e, effect) in effects(&guard).into_iter().enumerate() {
                let resource = format!("r{s}-{g}-{e}");
                let pk = format!("{tenant}|{resource}");
                if let Some(state) = &state {
                    test.client
                        .put_item()
                        .table_name(&test.tables.leases)
                        .set_item(Some(item(&pk, state)))
                        .send()
                        .await
                        .unwrap();
                }
                let before = state.clone().unwrap_or_default();
                let holds = guard.holds(&before, NOW);
                let write = Write {
                    guard: guard.clone(),
                    effect: effect.clone(),
                };
                let key = LeaseKey::new(&tenant, &resource);
                let expected = if holds {
                    Applied::Committed(effect.apply(&before))
                } else {
                    Applied::GuardFailed(before.clone())
                };
                let applied = store.apply(&key, &write, NOW).await.unwrap();
                if applied != expected {
                    wrong.push(format!(
                        "{state:?} {guard:?} {effect:?}: {applied:?}, expected {expected:?}"
                    ));
                }
                checked += 1;
            }
        }
    }
    // 39 states (no item; 3 counters, each free or granted to 2 holders at 3 expiries; 4
    // semaphores, a lease that was one, 2 with revoked permits, 4 queues, 4 with hand-offs, 2
    // finished); 5 vacant guards with one effect, 4 held ones with two, 9 version guards with
    // eight.
    assert_eq!(checked, 39 * (5 + 4 * 2 + 9 * 8));
    assert!(wrong.is_empty(), "{} wrong: {wrong:#?}", wrong.len());
}
