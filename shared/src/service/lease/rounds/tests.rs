//! The engine's every branch, on the scripted store: what it asks, in what order, and how each
//! outcome of a commit ends the rounds or starts another.

use super::*;
use crate::service::lease::fake::*;
use crate::store::StoreError;

#[tokio::test]
async fn a_guess_that_commits_needs_no_read_and_is_remembered_as_the_store_left_it() {
    let store = Scripted::default().commit(Ok(Outcome::Committed(Some(held(7)))));
    let mut probe = Probe::new(&["r"]);
    probe.guess = Some(probe.lone());
    let parts = Parts::default();
    let mut woken = parts.waits.subscribe(&key("r"));
    let ended = parts.run(&store, &mut probe).await.expect("committed");
    let Ended::Done { decision, left } = ended else {
        panic!("a commit ends the rounds: {ended:?}");
    };
    assert_eq!((decision, left.clone()), (0, Some(held(7))));
    assert_eq!(store.asked(), vec![Asked::Commit(Box::new(probe.lone()))]);
    // The lease the store says the write left, not the one the plan expected.
    assert_eq!(parts.views.get(&key("r")), Some(held(7)));
    // And this process's waiters for it are woken.
    tokio::time::timeout(std::time::Duration::from_secs(5), woken.until(60_000))
        .await
        .expect("woken by the commit");
}

#[tokio::test]
async fn a_together_commit_remembers_what_its_plan_leaves() {
    let store = Scripted::default()
        .read(snapshot(vec![held(1), held(1)], None))
        .commit(Ok(Outcome::Committed(None)));
    let mut probe = Probe::new(&["a", "b"]);
    probe.plans = Plans::Together;
    let parts = Parts::default();
    let ended = parts.run(&store, &mut probe).await.expect("committed");
    assert!(
        matches!(
            ended,
            Ended::Done {
                decision: 1,
                left: None
            }
        ),
        "{ended:?}"
    );
    assert_eq!(parts.views.get(&key("a")), Some(held(2)));
    assert_eq!(parts.views.get(&key("b")), Some(held(2)));
}

#[tokio::test]
async fn a_lease_a_failed_guard_hands_back_is_planned_on_with_no_read() {
    let store = Scripted::default()
        .commit(Ok(Outcome::Changed(Some(held(3)))))
        .commit(Ok(Outcome::Committed(Some(held(4)))));
    let mut probe = Probe::new(&["r"]);
    probe.guess = Some(probe.lone());
    assert_eq!(Parts::default().done(&store, &mut probe).await, 1);
    assert_eq!(probe.given, vec![(vec![held(3)], false)]);
    let commits = vec![
        Asked::Commit(Box::new(probe.lone())),
        Asked::Commit(Box::new(probe.lone())),
    ];
    assert_eq!(store.asked(), commits);
}

#[tokio::test]
async fn a_round_started_from_a_view_plans_on_it_with_no_read() {
    let store = Scripted::default().commit(Ok(Outcome::Committed(None)));
    let mut probe = Probe::recorded(&["r"]);
    let ended = Parts::default()
        .run_on(&store, &mut probe, held(3), true)
        .await
        .expect("committed");
    assert!(
        matches!(ended, Ended::Done { decision: 1, .. }),
        "{ended:?}"
    );
    // Planned on the view, its place known to be recorded.
    assert_eq!(probe.given, vec![(vec![held(3)], true)]);
    assert_eq!(
        store.asked(),
        vec![Asked::Commit(Box::new(probe.together()))]
    );
}

#[tokio::test]
async fn a_plan_on_a_view_that_writes_no_lease_is_made_again_on_a_read() {
    // An answer with no guarded write would stand on the view alone: it is decided on the
    // store's state instead.
    let store = Scripted::default().read(snapshot(vec![held(5)], None));
    let mut probe = Probe::new(&["r"]);
    probe.plans = Plans::Nothing;
    let ended = Parts::default()
        .run_on(&store, &mut probe, held(3), false)
        .await
        .expect("answered");
    assert!(
        matches!(ended, Ended::Done { decision: 2, .. }),
        "{ended:?}"
    );
    assert_eq!(
        probe.given,
        vec![(vec![held(3)], false), (vec![held(5)], false)]
    );
    assert_eq!(store.asked(), vec![read_of(&probe)]);
}

#[tokio::test]
async fn a_view_that_a_guard_finds_stale_is_planned_again_on_what_it_hands_back() {
    let store = Scripted::default()
        .commit(Ok(Outcome::Changed(Some(held(4)))))
        .commit(Ok(Outcome::Committed(Some(held(5)))));
    let mut probe = Probe::new(&["r"]);
    let parts = Parts::default();
    let ended = parts.run_on(&store, &mut probe, held(3), false).await;
    assert!(
        matches!(ended, Ok(Ended::Done { decision: 2, .. })),
        "{ended:?}"
    );
    assert_eq!(
        probe.given,
        vec![(vec![held(3)], false), (vec![held(4)], false)]
    );
    assert!(store.played_out());
    assert_eq!(parts.views.get(&key("r")), Some(held(5)));
}

#[tokio::test]
async fn a_change_with_nothing_handed_back_is_read() {
    let store = Scripted::default()
        .read(snapshot(vec![held(1)], None))
        .commit(Ok(Outcome::Changed(None)))
        .read(snapshot(vec![held(5)], None))
        .commit(Ok(Outcome::Committed(Some(held(6)))));
    let mut probe = Probe::new(&["r"]);
    assert_eq!(Parts::default().done(&store, &mut probe).await, 2);
    assert_eq!(
        probe.given,
        vec![(vec![held(1)], false), (vec![held(5)], false)]
    );
    assert!(store.played_out());
}

#[tokio::test]
async fn a_set_reads_again_whatever_a_failed_guard_hands_back() {
    // The first member came back, but the others may have changed too.
    let store = Scripted::default()
        .read(snapshot(vec![held(1), held(1)], None))
        .commit(Ok(Outcome::Changed(Some(held(9)))))
        .read(snapshot(vec![held(9), held(2)], None))
        .commit(Ok(Outcome::Committed(None)));
    let mut probe = Probe::new(&["a", "b"]);
    probe.plans = Plans::Together;
    assert_eq!(Parts::default().done(&store, &mut probe).await, 2);
    assert_eq!(probe.given[1].0, vec![held(9), held(2)]);
    assert!(store.played_out());
}

#[tokio::test]
async fn a_plan_with_nothing_to_commit_answers_at_once() {
    let store = Scripted::default().read(snapshot(vec![held(1)], None));
    let mut probe = Probe::new(&["r"]);
    probe.plans = Plans::Nothing;
    let ended = Parts::default()
        .run(&store, &mut probe)
        .await
        .expect("answered");
    assert!(
        matches!(
            ended,
            Ended::Done {
                decision: 1,
                left: None
            }
        ),
        "{ended:?}"
    );
    assert_eq!(store.asked(), vec![read_of(&probe)]);
}

#[tokio::test]
async fn a_read_that_finds_the_record_replays_it_and_commits_nothing() {
    for theirs in [
        record("mine", false),
        record("other input", false),
        record("other input", true),
    ] {
        let store = Scripted::default().read(snapshot(vec![held(1)], Some(theirs.clone())));
        let mut probe = Probe::new(&["r"]);
        probe.record = Some(RecordKey::new(&tenant(), "req-1"));
        let ended = Parts::default()
            .run(&store, &mut probe)
            .await
            .expect("replayed");
        assert!(
            matches!(&ended, Ended::Replay(r) if *r == theirs),
            "{ended:?}"
        );
        assert!(probe.given.is_empty());
        assert_eq!(store.asked(), vec![read_of(&probe)]);
    }
}

#[tokio::test]
async fn a_read_that_finds_this_inputs_place_resumes_it() {
    let store = Scripted::default()
        .read(snapshot(vec![held(1)], Some(record("mine", true))))
        .commit(Ok(Outcome::Committed(None)));
    let mut probe = Probe::recorded(&["r"]);
    assert_eq!(Parts::default().done(&store, &mut probe).await, 1);
    assert_eq!(probe.given, vec![(vec![held(1)], true)]);
}

#[tokio::test]
async fn a_commit_that_meets_a_record_replays_it() {
    // Planned on the store's state, whatever record holds the requestId answers, this input's
    // place too (the plan may replace the place, so the record met is not the place); planned
    // on a guess, any record but this input's place.
    for (guessed, fingerprint, queued) in [
        (false, "mine", false),
        (false, "other input", false),
        (false, "mine", true),
        (true, "mine", false),
        (true, "other input", true),
    ] {
        let found = record(fingerprint, queued);
        let mut store = Scripted::default();
        if !guessed {
            store = store.read(snapshot(vec![held(1)], None));
        }
        let store = store.commit(Ok(Outcome::RecordExists(found.clone())));
        let mut probe = Probe::recorded(&["r"]);
        if guessed {
            probe.guess = Some(probe.together());
        }
        let ended = Parts::default().run(&store, &mut probe).await;
        assert!(
            matches!(&ended, Ok(Ended::Replay(r)) if *r == found),
            "{ended:?}"
        );
        assert!(store.played_out());
    }
}

#[tokio::test]
async fn a_guess_that_meets_this_inputs_place_is_decided_again_on_a_read() {
    // The view does not show what was handed to the place: the store's state does.
    let store = Scripted::default()
        .commit(Ok(Outcome::RecordExists(record("mine", true))))
        .read(snapshot(vec![held(4)], Some(record("mine", true))))
        .commit(Ok(Outcome::Committed(None)));
    let mut probe = Probe::recorded(&["r"]);
    probe.guess = Some(probe.together());
    assert_eq!(Parts::default().done(&store, &mut probe).await, 1);
    assert_eq!(probe.given, vec![(vec![held(4)], true)]);
    assert!(store.played_out());
}

#[tokio::test]
async fn a_lease_that_keeps_changing_ends_as_contention_after_max_rounds() {
    let mut store = Scripted::default().read(snapshot(vec![held(1)], None));
    for _ in 0..MAX_ROUNDS {
        store = store.commit(Ok(Outcome::Changed(Some(held(1)))));
    }
    let mut probe = Probe::new(&["r"]);
    let ended = Parts::default().run(&store, &mut probe).await;
    assert!(matches!(ended, Err(LeaseError::Contention)), "{ended:?}");
    assert_eq!(probe.given.len(), MAX_ROUNDS);
    assert!(store.played_out(), "every round committed once, none more");
}

#[tokio::test]
async fn a_store_failure_ends_the_rounds_with_it() {
    let store = Scripted::default()
        .read(snapshot(vec![held(1)], None))
        .commit(Err(StoreError::Unavailable("timed out".into())));
    let mut probe = Probe::new(&["r"]);
    let ended = Parts::default().run(&store, &mut probe).await;
    assert!(
        matches!(ended, Err(LeaseError::Store(StoreError::Unavailable(_)))),
        "{ended:?}"
    );
    let store = Scripted::default().read(Err(StoreError::Corrupt("bad item".into())));
    let ended = Parts::default().run(&store, &mut Probe::new(&["r"])).await;
    assert!(
        matches!(ended, Err(LeaseError::Store(StoreError::Corrupt(_)))),
        "{ended:?}"
    );
}

#[tokio::test]
async fn a_lost_commit_changes_nothing_this_process_remembers_but_what_came_back() {
    let store = Scripted::default()
        .commit(Ok(Outcome::Changed(Some(held(3)))))
        .commit(Err(StoreError::Unavailable("lost".into())));
    let mut probe = Probe::new(&["r"]);
    probe.guess = Some(probe.lone());
    let parts = Parts::default();
    assert!(parts.run(&store, &mut probe).await.is_err());
    // The lease the failed guard showed, never a plan that did not commit.
    assert_eq!(parts.views.get(&key("r")), Some(held(3)));
}
