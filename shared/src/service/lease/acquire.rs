//! An acquire of one resource, and its wait (docs/adr/0007): each round of a wait is one run of
//! the round engine at its own time, then a sleep until the resource changes, a permit or place
//! ahead lapses, the wait ends, or the caller hangs up.

use super::mutation::{Mutation, MutationPlanner};
use super::rounds::Ended;
use super::{Call, LeaseError, LeaseService, SignedAnswer};
use crate::clock::Millis;
use crate::lease::LeaseState;
use crate::lease::decide::Asked;
use crate::service::waiting::{Woke, hung_up, next_change};

impl LeaseService {
    /// `asked` (its `wait_ms` the whole wait) on `resource`.
    pub(super) async fn acquire(
        &self,
        call: &Call<'_>,
        resource: &str,
        asked: Asked<'_>,
    ) -> Result<SignedAnswer, LeaseError> {
        // A wait holds its caller's connection for up to its whole length: one payer's waits
        // may take only their share of this server's (refused before anything is done).
        let _share = match (&self.wait_shares, asked.wait_ms > 0) {
            (Some(shares), true) => Some(
                shares
                    .take(call.actor.tenant)
                    .map_err(|taken| LeaseError::TooManyWaits(taken.0))?,
            ),
            _ => None,
        };
        let target = call.target([resource]);
        let key = &target.keys[0];
        let now = call.signing.now;
        let started = tokio::time::Instant::now();
        let deadline = now + asked.wait_ms;
        let mut round = 0;
        // A caller who hangs up ends its wait: it takes no permit it can no longer learn of
        // (it used to, for the whole ttl it asked, while the waiters behind it waited: the
        // attack of 2026-12-03, round 4). Its place lasts as any wait's, 30 s past the wait's
        // end; a permit freed meanwhile is kept for it until then, then goes on.
        let mut hung_up = hung_up();
        // A plain acquire of a single-permit lease races its rivals guarded, as writers in
        // other processes do, and takes no turn: its write only takes a permit, or writes a
        // hand-off that a lapse made, which the waiter's own timer is due at anyway, so no
        // waiter misses a wake-up it needs. On one contended lease the turns had made every
        // refusal wait for the one before it to reach the store (half the contended
        // throughput: BENCHMARKS.md, issue #28). A semaphore's acquire, a version-guarded
        // write, still takes turns: its rivals would lose the version race and back off.
        let races = asked.limit == 1 && asked.wait_ms == 0;
        // The call as planned at `at`. Past the deadline (a late last round) the wait left is
        // negative: the place is kept from the wait's end, as any place is, not lengthened by
        // the lateness.
        let planner_at = |at: Millis, guess_first: bool| MutationPlanner {
            target: &target,
            mutation: Mutation::Acquire(Asked {
                wait_ms: deadline - at,
                ..asked
            }),
            op: call.request.op,
            caller: call.caller(),
            signing: call.signing.at(at),
            issuer: &self.issuer,
            guess_first,
        };
        // The lease the next round starts from with no read: the view of the write that handed
        // this wait its permit (see `Engine::run_on`).
        let mut start: Option<LeaseState> = None;
        // Whether this input's place holds its requestId: once a round has left it waiting.
        let mut place_recorded = false;
        loop {
            let turn = match races {
                true => None,
                false => Some(self.waits.turn(key).await),
            };
            // Decided at the time it runs, its turn taken: never earlier than a read this
            // process answered before it, which showed the resource as of its own time. (The
            // last round of a wait used to decide at the wait's deadline, however late it ran:
            // a get in between could show a hand-off the round then undid, and two signed
            // answers named one token with two holders: the attack of 2026-12-05.)
            let round_now = round_time(now, started.elapsed());
            // After the first round the caller knows the resource is held or queued: it reads
            // (one read unit) instead of the unseen take, a write that would fail (one write
            // unit).
            let mut planned = planner_at(round_now, round == 0);
            round += 1;
            let engine = self.engine(round_now);
            let ended = match start.take() {
                Some(seen) => {
                    engine
                        .run_on(&target, &mut planned, seen, place_recorded)
                        .await?
                }
                None => engine.run(&target, &mut planned).await?,
            };
            let (answer, waits_on) = match ended {
                Ended::Done { decision, left } => planned.answer(decision, left)?,
                Ended::Replay(record) => (self.replayed(&record, &target.fingerprint)?, None),
            };
            // Armed before the turn is given up, so every later write of the resource in this
            // process wakes it, and its own write does not.
            let woken = self.waits.subscribe(key);
            drop(turn);
            // Waiting on, as the decision says: a refusal answers the caller's place too, and
            // is no wait (found by the attack of 2026-12-03, round 3: a LIMIT_MISMATCH waited
            // out the whole wait, and then answered its own record's replay).
            let Some(mut state) = waits_on.filter(|_| round_now < deadline) else {
                return Ok(answer);
            };
            place_recorded = target.record.is_some();
            let (mut woken, mut seen_at) = (woken, round_now);
            start = loop {
                let next = next_change(&state, seen_at, deadline);
                let woke = tokio::select! {
                    woke = woken.until(next - seen_at) => woke,
                    () = &mut hung_up => return Ok(answer),
                };
                if !self.waits.sole_writer() {
                    break None;
                }
                // Woken by a write here: most writes of a queued resource leave every waiter
                // but one where it was (a release hands the permit to the first in line), and
                // a round each, a read and a signed answer, made every hand-off cost as many
                // rounds as there were waiters (16 waiters: 24 store calls a grant, and a core
                // for 120 grants a second, where etcd's lock took a fifth of one). So first a
                // look at the state that write left: a round runs only if it would do more
                // than wait on. Armed again before the look (`until` does), so that a write
                // the view does not show yet wakes it again. (Woken by time, a permit or place
                // ahead lapsed, or the wait ended: no write, the view is as fresh as it was.)
                let by_write = woke == Woke::ByWrite;
                let at = round_time(now, started.elapsed());
                // A view older than the last write here is no sight of it (see `written`).
                let view = self.views.get(key).filter(|v| v.version >= woken.written());
                let Some(view) = view else {
                    break None;
                };
                let planner = planner_at(at, false);
                if !(by_write && at < deadline && planner.only_waits_on(&view)) {
                    // Handed its permit, or one free for it, it takes it in one store call, not
                    // a read and a write.
                    break planner.takes_on(&view).then_some(view);
                }
                state = view;
                seen_at = at;
            };
        }
    }
}

/// The time of a round that runs `elapsed` after its call started at `now`.
fn round_time(now: Millis, elapsed: std::time::Duration) -> Millis {
    now + Millis::try_from(elapsed.as_millis()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::now_ms;
    use crate::lease::LeaseRequest;
    use crate::provenance::Issuer;
    use crate::store::usage::measured;
    use crate::store::{LeaseKey, LeaseStore, Tables, ensure_tables};
    use crate::tenant::Tenant;
    use serde_json::json;
    use std::sync::Arc;
    use std::time::Duration;

    /// The service over fresh tables on an embedded dynoxide, served on loopback.
    async fn service() -> LeaseService {
        let database = dynoxide::Database::memory().expect("in-memory dynoxide");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(dynoxide::server::serve_on(listener, database));
        let client = crate::store::local_client(&url);
        let tables = Tables::with_prefix("t-");
        ensure_tables(&client, &tables).await.unwrap();
        let store = LeaseStore::new(client, &tables.leases, &tables.requests);
        LeaseService::new(store, Issuer::from_seed(&[7; 32]))
    }

    fn request(body: serde_json::Value) -> LeaseRequest {
        serde_json::from_value(body).unwrap()
    }

    /// The store round trips of a wait of `holder` (with a requestId when `id`), behind a holder
    /// of its resource that releases once the wait's place shows: the wait is handed the permit.
    /// Before the release, with `ahead` given, it is woken 10 times, 20 ms apart, as by writes
    /// that left the resource at the version the views show plus `ahead`. Its wait is 10 s and
    /// the release ends it: no count depends on how fast a loaded machine runs it (a wait of 1 s
    /// ended by its deadline once did, with CI's builds beside it: the wait's first round took
    /// its whole second, and no wake-up came while it waited).
    async fn trips_of_a_handed_wait(
        service: &Arc<LeaseService>,
        holder: &str,
        id: bool,
        ahead: Option<u64>,
    ) -> u32 {
        let tenant = Tenant::for_key("acme", "t1").unwrap();
        let resource = format!("r-{holder}");
        let hold = json!({"op": "acquire", "resource": resource, "holder": "h0", "ttlSeconds": 60});
        let held = service
            .execute(&tenant, &request(hold), [0; 32], now_ms())
            .await
            .unwrap();
        assert!(held.data.granted);
        let waiter = {
            let (service, tenant) = (service.clone(), tenant.clone());
            let mut wait = json!({"op": "acquire", "resource": resource, "holder": holder,
                "ttlSeconds": 60, "waitSeconds": 10});
            if id {
                wait["requestId"] = json!(format!("wait-{holder}"));
            }
            tokio::spawn(async move {
                measured(service.execute(&tenant, &request(wait), [1; 32], now_ms())).await
            })
        };
        let key = LeaseKey::new(&tenant, &resource);
        let seen = loop {
            match service.views.get(&key) {
                Some(seen) if seen.waiters.iter().any(|w| w.holder == holder) => break seen,
                _ => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        };
        if let Some(ahead) = ahead {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                service.waits.wake(&key, seen.version + ahead);
            }
        }
        assert!(!waiter.is_finished(), "the wait ended before its release");
        let release = json!({"op": "release", "resource": resource, "holder": "h0",
            "token": held.data.fencing_token});
        let released = service
            .execute(&tenant, &request(release), [2; 32], now_ms())
            .await
            .unwrap();
        assert!(released.data.granted, "{:?}", released.data);
        let (answer, usage) = waiter.await.unwrap();
        let answer = answer.unwrap();
        assert!(answer.data.granted, "{:?}", answer.data);
        assert_eq!(answer.data.holder.as_deref(), Some(holder));
        usage.round_trips
    }

    /// A waiter woken by a write looks at the views instead of reading, unless the views are
    /// older than the last write here: they forget everything when full, and a read that began
    /// before a write can put its older sight back after it (found by the attack of 2026-12-07,
    /// by reading the change). Such a waiter reads the store.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_waiter_woken_by_a_write_its_view_does_not_show_reads_the_store() {
        let service = Arc::new(service().await);
        // Its place (a guessed take refused, then the place written) and its grant: 3, however
        // often writes the view shows wake it.
        assert_eq!(
            trips_of_a_handed_wait(&service, "w1", false, Some(0)).await,
            3
        );
        // Woken by writes the view does not show, it reads.
        let trips = trips_of_a_handed_wait(&service, "w2", false, Some(1)).await;
        assert!(trips > 3, "{trips} round trips");
    }

    /// A waiter woken by the write that handed it its permit takes it from that write's view in
    /// one store call, instead of reading first (the attack of 2026-12-07 found waiters answered
    /// up to 170 ms after a saturated server's release: two queued store calls, not one).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_waiter_handed_its_permit_takes_it_without_a_read() {
        let service = Arc::new(service().await);
        // Its place (a guessed take refused, then the place written), then the grant.
        assert_eq!(trips_of_a_handed_wait(&service, "w1", false, None).await, 3);
        // With a requestId, the grant replaces its place's record in the same call.
        let trips = trips_of_a_handed_wait(&service, "w2", true, None).await;
        assert_eq!(trips, 3);
    }

    #[test]
    fn a_round_that_runs_past_the_waits_deadline_decides_at_the_time_it_runs() {
        // The call started at 1_000 and waits 2 s; its last round runs 2.5 s in (late: a turn
        // behind a slow write). It decides at 3_500, not at the deadline, 3_000, which a read
        // answered in between (at 3_200, say) would be later than.
        let round = round_time(1_000, std::time::Duration::from_millis(2_500));
        assert_eq!(round, 3_500);
    }
}
