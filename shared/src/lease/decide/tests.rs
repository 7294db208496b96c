//! Exhaustive tests of the lease rules over small states.

use super::*;

const NOW: Millis = 1_000_000;

/// A lease at `last_token`, its latest grant to `holder` until `expires_at` (both or neither).
fn state(last_token: u64, holder: Option<&str>, expires_at: Option<Millis>) -> LeaseState {
    match (holder, expires_at) {
        (Some(holder), Some(expires_at)) => LeaseState::granted(last_token, holder, expires_at),
        (None, None) => LeaseState::vacant(last_token),
        _ => panic!("a lease keeps a holder with its expiry"),
    }
}

fn acquire(holder: &str) -> Command {
    Command::Acquire {
        holder: holder.into(),
        ttl_ms: 30_000,
    }
}

fn renew(holder: &str, token: u64) -> Command {
    Command::Renew {
        holder: holder.into(),
        token,
        ttl_ms: 10_000,
    }
}

fn release(holder: &str, token: u64) -> Command {
    Command::Release {
        holder: holder.into(),
        token,
    }
}

fn rule_ids(d: &Decision) -> Vec<&str> {
    match d {
        Decision::Deny(w) => w.iter().map(|w| w.rule_id.as_str()).collect(),
        _ => vec![],
    }
}

/// Every state shape the rules distinguish: never acquired, released, lapsed (exactly at the
/// boundary and before), live; different holders and tokens; the token ceiling.
fn all_states() -> Vec<LeaseState> {
    let mut out = vec![state(0, None, None), state(MAX_TOKEN, None, None)];
    for token in [1, 2, MAX_TOKEN] {
        out.push(state(token, None, None));
        for holder in ["a", "b"] {
            for expires in [NOW - 1, NOW, NOW + 1, NOW + 60_000] {
                out.push(state(token, Some(holder), Some(expires)));
            }
        }
    }
    out
}

fn all_commands() -> Vec<Command> {
    let mut out = vec![Command::Get];
    for holder in ["a", "b"] {
        out.push(acquire(holder));
        for token in [1, 2, 3] {
            out.push(renew(holder, token));
            out.push(release(holder, token));
        }
    }
    out
}

#[test]
fn acquire_of_a_never_used_resource_issues_token_1() {
    let d = decide(&LeaseState::default(), &acquire("a"), NOW);
    let Decision::Write(w) = d else {
        panic!("not granted: {d:?}")
    };
    let after = w.effect.apply(&LeaseState::default());
    assert_eq!(after, state(1, Some("a"), Some(NOW + 30_000)));
}

#[test]
fn acquire_after_release_or_lapse_issues_the_next_token() {
    for s in [
        state(7, None, None),
        state(7, Some("b"), Some(NOW)),
        state(7, Some("a"), Some(NOW - 1)),
    ] {
        let Decision::Write(w) = decide(&s, &acquire("a"), NOW) else {
            panic!("{s:?}")
        };
        assert_eq!(w.guard, Guard::VacantAt { last_token: 7 });
        assert_eq!(w.effect.apply(&s).last_token, 8);
    }
}

#[test]
fn lease_is_held_strictly_before_expiry() {
    assert!(state(1, Some("a"), Some(NOW + 1)).live(NOW).is_some());
    assert!(state(1, Some("a"), Some(NOW)).live(NOW).is_none());
}

#[test]
fn reacquire_by_live_holder_keeps_token_and_moves_expiry() {
    let s = state(4, Some("a"), Some(NOW + 5));
    let Decision::Write(w) = decide(&s, &acquire("a"), NOW) else {
        panic!()
    };
    assert_eq!(w.effect.apply(&s), state(4, Some("a"), Some(NOW + 30_000)));
}

#[test]
fn acquire_while_another_holds_is_lease_held() {
    let d = decide(&state(4, Some("b"), Some(NOW + 5)), &acquire("a"), NOW);
    assert_eq!(rule_ids(&d), ["LEASE_HELD"]);
}

#[test]
fn acquire_at_the_token_ceiling_is_refused() {
    let d = decide(&state(MAX_TOKEN, None, None), &acquire("a"), NOW);
    assert_eq!(rule_ids(&d), ["TOKEN_EXHAUSTED"]);
}

#[test]
fn renew_rules() {
    let live = state(4, Some("a"), Some(NOW + 5));
    let Decision::Write(w) = decide(&live, &renew("a", 4), NOW) else {
        panic!()
    };
    assert_eq!(
        w.effect.apply(&live),
        state(4, Some("a"), Some(NOW + 10_000))
    );
    assert_eq!(
        rule_ids(&decide(&live, &renew("b", 4), NOW)),
        ["NOT_HOLDER"]
    );
    assert_eq!(
        rule_ids(&decide(&live, &renew("a", 3), NOW)),
        ["TOKEN_MISMATCH"]
    );
    assert_eq!(
        rule_ids(&decide(&live, &renew("b", 3), NOW)),
        ["NOT_HOLDER", "TOKEN_MISMATCH"]
    );
    let lapsed = state(4, Some("a"), Some(NOW));
    assert_eq!(
        rule_ids(&decide(&lapsed, &renew("a", 4), NOW)),
        ["LEASE_EXPIRED"]
    );
    assert_eq!(rule_ids(&decide(&lapsed, &renew("b", 4), NOW)), ["NO_HOLD"]);
    assert_eq!(
        rule_ids(&decide(&state(4, None, None), &renew("a", 4), NOW)),
        ["NO_HOLD"]
    );
}

#[test]
fn release_rules() {
    let live = state(4, Some("a"), Some(NOW + 5));
    let Decision::Write(w) = decide(&live, &release("a", 4), NOW) else {
        panic!()
    };
    assert_eq!(w.effect.apply(&live), state(4, None, None));
    for (s, c) in [
        (live.clone(), release("b", 4)),
        (live.clone(), release("a", 3)),
        (state(4, Some("a"), Some(NOW)), release("a", 4)),
        (state(4, None, None), release("a", 4)),
    ] {
        assert_eq!(rule_ids(&decide(&s, &c, NOW)), ["NO_HOLD"], "{s:?} {c:?}");
    }
}

#[test]
fn get_never_writes() {
    for s in all_states() {
        assert_eq!(decide(&s, &Command::Get, NOW), Decision::Observe);
    }
}

/// Whatever `decide` writes is guarded by a condition true of the state it decided on.
#[test]
fn every_decided_write_is_guarded_by_the_state_it_was_decided_on() {
    for s in all_states() {
        for c in all_commands() {
            if let Decision::Write(w) = decide(&s, &c, NOW) {
                assert!(w.guard.holds(&s, NOW), "{s:?} {c:?} {w:?}");
            }
        }
    }
}

/// The one-round-trip path is sound: the optimistic write's guard holds exactly when `decide`
/// grants the same effect, so skipping the read never grants what `decide` would refuse.
#[test]
fn optimistic_write_commits_exactly_when_decide_grants_it() {
    for s in all_states() {
        for c in all_commands() {
            let Some(opt) = optimistic(&c, NOW) else {
                continue;
            };
            let decided = match decide(&s, &c, NOW) {
                Decision::Write(w) => Some(w.effect.apply(&s)),
                _ => None,
            };
            let optimistic_after = opt.guard.holds(&s, NOW).then(|| opt.effect.apply(&s));
            if optimistic_after.is_some() {
                assert_eq!(optimistic_after, decided, "{s:?} {c:?}");
            } else if let Some(after) = decided {
                // The only grant the optimistic write misses: re-acquire by the live holder.
                assert!(matches!(c, Command::Acquire { .. }), "{s:?} {c:?}");
                assert_eq!(after.last_token, s.last_token, "{s:?} {c:?}");
            }
        }
    }
}

#[test]
fn tokens_only_ever_grow() {
    for s in all_states() {
        for c in all_commands() {
            if let Decision::Write(w) = decide(&s, &c, NOW) {
                assert!(w.effect.apply(&s).last_token >= s.last_token);
            }
        }
    }
}

/// The write planned on any view, committed on any state its guard holds on, leaves exactly the
/// state `outcome` announced before the write: so an answer written with it is the write's.
#[test]
fn a_planned_write_leaves_the_state_it_announced_wherever_it_commits() {
    let mut planned_writes = 0;
    for view in all_states() {
        for c in all_commands() {
            let Some(w) = planned(&view, &c, NOW) else {
                continue;
            };
            let announced = w.outcome().expect("a planned write pins the counter");
            for s in all_states() {
                if w.guard.holds(&s, NOW) {
                    assert_eq!(w.effect.apply(&s), announced, "{view:?} {c:?} {s:?}");
                    // And it is what `decide` would have done on the state it committed on.
                    let Decision::Write(decided) = decide(&s, &c, NOW) else {
                        panic!("{view:?} {c:?} {s:?}: granted where decide refuses");
                    };
                    assert_eq!(decided.effect.apply(&s), announced, "{view:?} {c:?} {s:?}");
                }
            }
            planned_writes += 1;
        }
    }
    assert!(planned_writes > 0);
    // No view plans a write for a get, and every renew and release is planned.
    assert_eq!(planned(&LeaseState::default(), &Command::Get, NOW), None);
    assert!(planned(&LeaseState::default(), &renew("a", 1), NOW).is_some());
}

/// A committed write shows in the state it leaves, and only a write of the same holder does: so
/// a retry that finds it knows its own lost attempt committed.
#[test]
fn a_write_shows_in_what_it_leaves_and_not_in_another_holders_state() {
    let mut checked = 0;
    for s in all_states() {
        for c in all_commands() {
            let Decision::Write(w) = decide(&s, &c, NOW) else {
                continue;
            };
            let after = w.effect.apply(&s);
            assert!(w.shows_in(&after), "{s:?} {c:?} {w:?}");
            // Another holder's take never looks like this write.
            let other = Effect::Take {
                holder: "someone-else".into(),
                expires_at: NOW + 7,
            }
            .apply(&s);
            assert!(!w.shows_in(&other), "{s:?} {c:?} {w:?}");
            checked += 1;
        }
    }
    assert!(checked > 0);
}
