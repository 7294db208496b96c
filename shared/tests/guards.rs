//! Each guard's DynamoDB condition means what `Guard::holds` says, on the real store: over every
//! small lease state (no item; or each counter, free or granted with an expiry around `now`), every
//! guard and each effect `decide` pairs with it, a guarded write commits exactly when `holds` is true, leaves the item
//! as `Effect::apply` says when it does, and hands back the item untouched when it does not.
//! (The Rust side alone is tested in `lease::decide`; this is its translation.)

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::test_store;
use leasekit_core::clock::Millis;
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
    states
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
    }
}

/// The item as the store lays it out (`store/mod.rs`: `pk`, `tok`, `holder`, `exp`).
fn item(pk: &str, state: &LeaseState) -> std::collections::HashMap<String, AttributeValue> {
    let mut item = std::collections::HashMap::from([
        ("pk".to_owned(), AttributeValue::S(pk.to_owned())),
        (
            "tok".to_owned(),
            AttributeValue::N(state.last_token.to_string()),
        ),
    ]);
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
    // 22 states (no item; 3 counters, each free or granted to 2 holders at 3 expiries); 5
    // vacant guards with one effect, 4 held ones with two.
    assert_eq!(checked, 22 * (5 + 4 * 2));
    assert!(wrong.is_empty(), "{} wrong: {wrong:#?}", wrong.len());
}
