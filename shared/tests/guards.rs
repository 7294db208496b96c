//! Each guard's DynamoDB condition means what `Guard::holds` says, on the real store: over every
//! small lease state (no item; or each counter, free or granted with an expiry around `now`), every
//! guard and each effect `decide` pairs with it, a guarded write commits exactly when `holds` is true, leaves the item
//! as `Effect::apply` says when it does, and hands back the item untouched when it does not.
//! (The Rust side alone is tested in `lease::decide`; this is its translation.)

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::test_store;
use leasekit_core::clock::Millis;
use leasekit_core::lease::model::{Permit, Place, Revoked};
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
    states
}

/// `state` with one place, of "c", lapsing at `until`.
fn queued(state: LeaseState, until: Millis) -> LeaseState {
    LeaseState {
        waiters: vec![Place {
            holder: "c".into(),
            limit: state.limit,
            until,
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
            .map(|(i, expires_at)| Permit {
                holder: ["a", "b"][i].into(),
                token: i as u64 + 1,
                expires_at: *expires_at,
            })
            .collect(),
        waiters: Vec::new(),
        revoked: Vec::new(),
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
                    Permit {
                        holder: "b".into(),
                        token: 2,
                        expires_at: NOW + 1,
                    },
                    Permit {
                        holder: "c".into(),
                        token: 3,
                        expires_at: NOW + 5_000,
                    },
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
    if state.version > 0 {
        item.insert("ver".into(), n(state.version));
    }
    if state.is_versioned() {
        let pm = state.permits.iter().map(|p| {
            let permit = [
                ("t".to_owned(), n(p.token)),
                ("e".to_owned(), n(p.expires_at as u64)),
            ];
            (p.holder.clone(), AttributeValue::M(permit.into()))
        });
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
                let place = [
                    ("h".to_owned(), AttributeValue::S(w.holder.clone())),
                    ("u".to_owned(), n(w.until as u64)),
                    ("l".to_owned(), n(w.limit.into())),
                ];
                AttributeValue::M(place.into())
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
    // 33 states (no item; 3 counters, each free or granted to 2 holders at 3 expiries; 4
    // semaphores, a lease that was one, 2 with revoked permits, 4 queues); 5 vacant guards with
    // one effect, 4 held ones with two, 9 version guards with five.
    assert_eq!(checked, 33 * (5 + 4 * 2 + 9 * 5));
    assert!(wrong.is_empty(), "{} wrong: {wrong:#?}", wrong.len());
}
